//! The catalog: every tool this process serves, each definition checked, each input schema
//! compiled once into a validator.

use std::collections::HashMap;
use std::sync::Arc;

use aether_policy::{Digest, ToolDef};
use aether_tools_core::Tool;
use serde_json::Value;

#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    #[error("two tools are named {0:?}")]
    Duplicate(String),
    #[error("tool {name:?} is not well-formed: {}", problems.join("; "))]
    Malformed { name: String, problems: Vec<String> },
}

/// One tool of the catalog, with what is computed once for it.
pub struct Entry {
    pub tool: Arc<dyn Tool>,
    /// The digest of its definition (what the registry binds approvals to).
    pub digest: Digest,
    /// An upstream's tool (approved by an operator), not a built-in (approved from source).
    pub external: bool,
    validator: jsonschema::Validator,
}

impl Entry {
    pub fn def(&self) -> &ToolDef {
        self.tool.def()
    }

    /// A built-in tool served outside the catalog (the operator's undo), as the catalog would
    /// hold it.
    pub(crate) fn outside(tool: Arc<dyn Tool>) -> Result<Entry, CatalogError> {
        let validator = compile(tool.def()).map_err(|problems| CatalogError::Malformed {
            name: tool.def().name.clone(),
            problems,
        })?;
        Ok(Entry {
            digest: tool.def().digest(),
            tool,
            external: false,
            validator,
        })
    }
}

#[derive(Clone)]
pub struct Catalog {
    entries: Vec<Arc<Entry>>,
    index: HashMap<String, usize>,
}

impl Catalog {
    pub fn new(tools: Vec<Arc<dyn Tool>>) -> Result<Catalog, CatalogError> {
        Catalog::with_external(tools, Vec::new())
    }

    /// The built-ins, each of which must be well-formed (a malformed one is a bug and an
    /// error), and the external tools (an upstream's), of which one that is malformed, or
    /// repeats a name, is left out with a warning: no upstream can keep Aether from starting.
    pub fn with_external(
        tools: Vec<Arc<dyn Tool>>,
        external: Vec<Arc<dyn Tool>>,
    ) -> Result<Catalog, CatalogError> {
        let mut catalog = Catalog {
            entries: Vec::with_capacity(tools.len() + external.len()),
            index: HashMap::new(),
        };
        for tool in tools {
            let def = tool.def();
            if catalog.index.contains_key(&def.name) {
                return Err(CatalogError::Duplicate(def.name.clone()));
            }
            let validator = compile(def).map_err(|problems| CatalogError::Malformed {
                name: def.name.clone(),
                problems,
            })?;
            catalog.push(tool, validator, false);
        }
        catalog.add_external(external);
        Ok(catalog)
    }

    /// This catalog with the external tools whose names start with `prefix` (an upstream's
    /// `SERVER__`) replaced by `tools`. The other entries are shared, not compiled again.
    pub fn replacing(&self, prefix: &str, tools: Vec<Arc<dyn Tool>>) -> Catalog {
        let mut catalog = Catalog {
            entries: Vec::with_capacity(self.entries.len() + tools.len()),
            index: HashMap::new(),
        };
        for entry in &self.entries {
            if entry.external && entry.def().name.starts_with(prefix) {
                continue;
            }
            catalog
                .index
                .insert(entry.def().name.clone(), catalog.entries.len());
            catalog.entries.push(entry.clone());
        }
        catalog.add_external(tools);
        catalog
    }

    fn add_external(&mut self, external: Vec<Arc<dyn Tool>>) {
        let catalog = self;
        for tool in external {
            let name = tool.def().name.clone();
            if catalog.index.contains_key(&name) {
                tracing::warn!(tool = %name, "an external tool repeats a name in the catalog and was left out");
                continue;
            }
            match compile(tool.def()) {
                Ok(validator) => catalog.push(tool, validator, true),
                Err(problems) => tracing::warn!(
                    tool = %name,
                    problems = %problems.join("; "),
                    "an external tool is malformed and was left out"
                ),
            }
        }
    }

    fn push(&mut self, tool: Arc<dyn Tool>, validator: jsonschema::Validator, external: bool) {
        let digest = tool.def().digest();
        self.index
            .insert(tool.def().name.clone(), self.entries.len());
        self.entries.push(Arc::new(Entry {
            tool,
            digest,
            external,
            validator,
        }));
    }

    pub fn get(&self, name: &str) -> Option<&Arc<Entry>> {
        self.index.get(name).map(|&i| &self.entries[i])
    }

    pub fn iter(&self) -> impl Iterator<Item = &Arc<Entry>> {
        self.entries.iter()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Checks `args` against the tool's input schema; the error names up to five problems,
    /// each with where it is.
    pub fn validate(&self, name: &str, args: &Value) -> Result<(), String> {
        let Some(&i) = self.index.get(name) else {
            return Err(format!("no tool named {name:?}"));
        };
        let validator = &self.entries[i].validator;
        if validator.is_valid(args) {
            return Ok(());
        }
        let problems: Vec<String> = validator
            .iter_errors(args)
            .take(5)
            .map(|e| {
                let at = e.instance_path().to_string();
                let at = if at.is_empty() {
                    "(top level)".to_string()
                } else {
                    at
                };
                format!("{at}: {}", e.masked())
            })
            .collect();
        Err(problems.join("; "))
    }
}

/// A definition's input validator, or everything wrong with the definition.
fn compile(def: &aether_policy::ToolDef) -> Result<jsonschema::Validator, Vec<String>> {
    let mut problems = def.problems();
    for (which, schema) in [("input", &def.input_schema), ("output", &def.output_schema)] {
        if let Err(e) = jsonschema::meta::validate(schema) {
            problems.push(format!("{which} schema is not valid JSON Schema: {e}"));
        }
    }
    match jsonschema::validator_for(&def.input_schema) {
        Ok(v) if problems.is_empty() => Ok(v),
        Ok(_) => Err(problems),
        Err(e) => {
            problems.push(format!("input schema does not compile: {e}"));
            Err(problems)
        }
    }
}
