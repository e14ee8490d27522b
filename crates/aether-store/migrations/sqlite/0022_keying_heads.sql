-- The keying marker names every chain's newest row at keying (JSON: chain, link, seq, hash),
-- signed with the rest: each chain's keyless rows end exactly there, so a chain whose writer
-- never wrote again cannot be rewritten, cut or removed without the key. NULL: a marker of an
-- older release (pinning one row by number), named in full at the next keyed open.
ALTER TABLE audit_keying ADD COLUMN heads TEXT;
