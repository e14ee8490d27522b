//! The definition screen (`aether_policy::definition_screen`) over what the registry holds:
//! the findings of an upstream tool's definition, worked out from the stored definition
//! whenever someone looks (the CLI, the admin API, the console, an approval), so they are
//! always those of the definition an approval would bind. Built-in tools come from Aether's
//! source and are not screened.

use aether_policy::ToolDef;
use aether_policy::definition_screen::{
    DefinitionFinding, DefinitionScreen, FindingsDiff, ScreenMode, compare_findings,
};
use aether_store::{RegistryRow, StoreError};

/// What the screen found in one registry row.
#[derive(Debug, Default, serde::Serialize)]
pub struct Screened {
    /// In the definition last seen (the one an approval now would bind).
    pub findings: Vec<DefinitionFinding>,
    /// Those the definition brought since the one approved (all of them before any approval).
    pub new_since_approval: Vec<DefinitionFinding>,
}

/// The screen for a registry: every name in it, so a definition naming another tool is found.
pub fn screen_for(rows: &[RegistryRow]) -> DefinitionScreen {
    DefinitionScreen::new(rows.iter().map(|r| r.name.as_str()))
}

/// The findings of `row` (none for a built-in, or a definition that does not parse).
pub fn screen_row(screen: &DefinitionScreen, row: &RegistryRow) -> Screened {
    if row.origin != "external" {
        return Screened::default();
    }
    let findings = findings_of(screen, &row.definition);
    let approved = row
        .approved_definition
        .as_deref()
        .map(|d| findings_of(screen, d))
        .unwrap_or_default();
    let FindingsDiff { added, .. } = compare_findings(&approved, &findings);
    Screened {
        findings,
        new_since_approval: added,
    }
}

fn findings_of(screen: &DefinitionScreen, definition: &str) -> Vec<DefinitionFinding> {
    serde_json::from_str::<ToolDef>(definition)
        .map(|def| screen.screen(&def))
        .unwrap_or_default()
}

/// Refuses approving `row`'s seen definition when the operator's `[registry] screen` blocks
/// approval and the screen found something in it.
pub fn check_approval(
    mode: ScreenMode,
    screen: &DefinitionScreen,
    row: &RegistryRow,
) -> Result<(), StoreError> {
    let found = screen_row(screen, row).findings;
    if mode.blocks_approval(&found) {
        let rules: Vec<&str> = found.iter().map(|f| f.rule.as_str()).collect();
        return Err(StoreError::Invalid(format!(
            "{} is not approved: the definition screen found {} thing(s) in it ({}), and \
             [registry] screen = \"block\" in aether.toml; `aether registry show {}` shows them",
            row.name,
            found.len(),
            rules.join(", "),
            row.name
        )));
    }
    Ok(())
}
