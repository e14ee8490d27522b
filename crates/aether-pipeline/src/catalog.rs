//! The catalog: every tool this process serves, each definition checked, each input schema
//! compiled once into a validator.

use std::collections::HashMap;
use std::sync::Arc;

use aether_tools::Tool;
use serde_json::Value;

#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    #[error("two tools are named {0:?}")]
    Duplicate(String),
    #[error("tool {name:?} is not well-formed: {}", problems.join("; "))]
    Malformed { name: String, problems: Vec<String> },
}

pub struct Catalog {
    tools: Vec<Arc<dyn Tool>>,
    index: HashMap<String, usize>,
    validators: Vec<jsonschema::Validator>,
}

impl Catalog {
    pub fn new(tools: Vec<Arc<dyn Tool>>) -> Result<Catalog, CatalogError> {
        let mut index = HashMap::new();
        let mut validators = Vec::with_capacity(tools.len());
        for (i, tool) in tools.iter().enumerate() {
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
            match jsonschema::validator_for(&def.input_schema) {
                Ok(v) if problems.is_empty() => validators.push(v),
                Ok(_) => {}
                Err(e) => problems.push(format!("input schema does not compile: {e}")),
            }
            if !problems.is_empty() {
                return Err(CatalogError::Malformed { name: def.name.clone(), problems });
            }
        }
        Ok(Catalog { tools, index, validators })
    }

    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.index.get(name).map(|&i| &self.tools[i])
    }

    pub fn iter(&self) -> impl Iterator<Item = &Arc<dyn Tool>> {
        self.tools.iter()
    }

    pub fn len(&self) -> usize {
        self.tools.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// Checks `args` against the tool's input schema; the error names up to five problems,
    /// each with where it is.
    pub fn validate(&self, name: &str, args: &Value) -> Result<(), String> {
        let Some(&i) = self.index.get(name) else {
            return Err(format!("no tool named {name:?}"));
        };
        let validator = &self.validators[i];
        if validator.is_valid(args) {
            return Ok(());
        }
        let problems: Vec<String> = validator
            .iter_errors(args)
            .take(5)
            .map(|e| {
                let at = e.instance_path().to_string();
                let at = if at.is_empty() { "(top level)".to_string() } else { at };
                format!("{at}: {}", e.masked())
            })
            .collect();
        Err(problems.join("; "))
    }
}
