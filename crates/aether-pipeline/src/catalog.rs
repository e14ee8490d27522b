//! The catalog: every tool this process serves, each definition checked, each input schema
//! compiled once into a validator.

use std::collections::HashMap;
use std::sync::Arc;

use aether_policy::{Digest, ToolDef};
use aether_tools::Tool;
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
    validator: jsonschema::Validator,
}

impl Entry {
    pub fn def(&self) -> &ToolDef {
        self.tool.def()
    }
}

pub struct Catalog {
    entries: Vec<Entry>,
    index: HashMap<String, usize>,
}

impl Catalog {
    pub fn new(tools: Vec<Arc<dyn Tool>>) -> Result<Catalog, CatalogError> {
        let mut index = HashMap::new();
        let mut entries = Vec::with_capacity(tools.len());
        for (i, tool) in tools.into_iter().enumerate() {
            let def = tool.def();
            if index.insert(def.name.clone(), i).is_some() {
                return Err(CatalogError::Duplicate(def.name.clone()));
            }
            let mut problems = def.problems();
            for (which, schema) in [("input", &def.input_schema), ("output", &def.output_schema)] {
                if let Err(e) = jsonschema::meta::validate(schema) {
                    problems.push(format!("{which} schema is not valid JSON Schema: {e}"));
                }
            }
            let validator = match jsonschema::validator_for(&def.input_schema) {
                Ok(v) if problems.is_empty() => v,
                Ok(_) => {
                    return Err(CatalogError::Malformed {
                        name: def.name.clone(),
                        problems,
                    });
                }
                Err(e) => {
                    problems.push(format!("input schema does not compile: {e}"));
                    return Err(CatalogError::Malformed {
                        name: def.name.clone(),
                        problems,
                    });
                }
            };
            let digest = def.digest();
            entries.push(Entry {
                tool,
                digest,
                validator,
            });
        }
        Ok(Catalog { entries, index })
    }

    /// What [`Catalog::new`] would find wrong with one definition.
    pub fn check(def: &aether_policy::ToolDef) -> Result<(), String> {
        let mut problems = def.problems();
        for (which, schema) in [("input", &def.input_schema), ("output", &def.output_schema)] {
            if let Err(e) = jsonschema::meta::validate(schema) {
                problems.push(format!("{which} schema is not valid JSON Schema: {e}"));
            }
        }
        if let Err(e) = jsonschema::validator_for(&def.input_schema) {
            problems.push(format!("input schema does not compile: {e}"));
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems.join("; "))
        }
    }

    pub fn get(&self, name: &str) -> Option<&Entry> {
        self.index.get(name).map(|&i| &self.entries[i])
    }

    pub fn iter(&self) -> impl Iterator<Item = &Entry> {
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
