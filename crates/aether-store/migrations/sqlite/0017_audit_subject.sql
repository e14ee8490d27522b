-- The person an OAuth access token was issued to (its `sub`, with the issuer), beside the
-- agent the call acted as. Part of the row's hash when present; rows without it hash as before.
ALTER TABLE audit ADD COLUMN subject TEXT;
