//! Jsonnet, evaluated natively with `rsjsonnet-lang` from the repository
//! snapshot: imports resolve relative to the importing file and may not
//! leave the repository.
//!
//! The entry file may evaluate to one object, an array of objects, or an
//! object of objects (keyed by any name; emitted in key order).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use rsjsonnet_lang::arena::Arena;
use rsjsonnet_lang::interner::InternedStr;
use rsjsonnet_lang::program::{
    Callbacks, EvalStackTraceItem, ImportError, NativeError, Program, Thunk, Value,
};
use rsjsonnet_lang::span::{SpanContextId, SpanId};
use serde_json::Value as Json;

use super::RenderError;
use crate::files::{Entry, Files};
use crate::manifest::{Manifest, Origin, identify};
use crate::spec::JsonnetOptions;

pub fn render(
    repository: &Files,
    path: &str,
    options: &JsonnetOptions,
) -> Result<Vec<Manifest>, RenderError> {
    let main = if options.main.is_empty() {
        "main.jsonnet"
    } else {
        options.main.as_str()
    };
    let main = join(path, main).ok_or_else(|| escape(main))?;
    let failed = |message: String| RenderError::Failed {
        renderer: "jsonnet".into(),
        message: format!("{main}: {message}"),
    };
    let arena = Arena::new();
    let mut program = Program::new(&arena);
    program.set_max_stack(500);
    for (name, value) in &options.ext_vars {
        let thunk = program.value_to_thunk(&Value::string(value));
        let name = program.intern_str(name);
        program.add_ext_var(name, &thunk);
    }
    let mut loader = Loader {
        repository,
        files: HashMap::new(),
    };
    let thunk = loader
        .load(&mut program, &main)
        .map_err(|_| failed("cannot load (missing, not UTF-8, or a syntax error)".into()))?;
    let value = program
        .eval_value(&thunk, &mut loader)
        .map_err(|e| failed(format!("{e:?}")))?;
    let text = program
        .manifest_json(&value, false)
        .map_err(|e| failed(format!("{e:?}")))?;
    let json: Json = serde_json::from_str(&text).map_err(|e| failed(e.to_string()))?;
    let objects = match json {
        Json::Array(items) => items,
        Json::Object(map) if map.contains_key("apiVersion") || map.contains_key("kind") => {
            vec![Json::Object(map)]
        }
        Json::Object(map) => {
            let mut entries: Vec<(String, Json)> = map.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            entries.into_iter().map(|(_, v)| v).collect()
        }
        other => return Err(failed(format!("evaluates to {other}, not objects"))),
    };
    let file = PathBuf::from(&main);
    let with_origins = objects
        .into_iter()
        .enumerate()
        .map(|(document, object)| {
            let origin = Origin {
                file: file.clone(),
                document,
                line: 0,
                item: None,
            };
            (origin, object)
        })
        .collect();
    Ok(identify(with_origins)?)
}

fn escape(path: &str) -> RenderError {
    RenderError::PathEscape {
        path: path.into(),
        reason: "jsonnet import escapes the repository".into(),
    }
}

/// `base/relative`, normalized; `None` if it leaves the repository.
fn join(base: &str, relative: &str) -> Option<String> {
    let mut parts: Vec<&str> = base.split('/').filter(|p| !p.is_empty()).collect();
    if relative.starts_with('/') {
        return None;
    }
    for part in relative.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            part => parts.push(part),
        }
    }
    Some(parts.join("/"))
}

struct Loader<'a> {
    repository: &'a Files,
    /// Which file each loaded source came from, to resolve its imports.
    files: HashMap<SpanContextId, String>,
}

impl Loader<'_> {
    fn bytes(&self, path: &str) -> Result<&[u8], ImportError> {
        match self.repository.entries.get(path) {
            Some(Entry::File(bytes)) => Ok(bytes),
            _ => Err(ImportError),
        }
    }

    fn load<'p>(
        &mut self,
        program: &mut Program<'p>,
        path: &str,
    ) -> Result<Thunk<'p>, ImportError> {
        let bytes = self.bytes(path)?.to_vec();
        let (context, _) = program
            .span_manager_mut()
            .insert_source_context(bytes.len());
        self.files.insert(context, path.to_string());
        program
            .load_source(context, &bytes, true, path)
            .map_err(|_| ImportError)
    }

    fn resolve(
        &self,
        program: &Program<'_>,
        from: SpanId,
        path: &str,
    ) -> Result<String, ImportError> {
        let (context, _, _) = program.span_manager().get_span(from);
        let importer = self.files.get(&context).ok_or(ImportError)?;
        let dir = Path::new(importer)
            .parent()
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default();
        join(&dir, path).ok_or(ImportError)
    }
}

impl<'p> Callbacks<'p> for Loader<'_> {
    fn import(
        &mut self,
        program: &mut Program<'p>,
        from: SpanId,
        path: &str,
    ) -> Result<Thunk<'p>, ImportError> {
        let resolved = self.resolve(program, from, path)?;
        self.load(program, &resolved)
    }

    fn import_str(
        &mut self,
        program: &mut Program<'p>,
        from: SpanId,
        path: &str,
    ) -> Result<String, ImportError> {
        let resolved = self.resolve(program, from, path)?;
        String::from_utf8(self.bytes(&resolved)?.to_vec()).map_err(|_| ImportError)
    }

    fn import_bin(
        &mut self,
        program: &mut Program<'p>,
        from: SpanId,
        path: &str,
    ) -> Result<Vec<u8>, ImportError> {
        let resolved = self.resolve(program, from, path)?;
        Ok(self.bytes(&resolved)?.to_vec())
    }

    fn trace(&mut self, _: &mut Program<'p>, message: &str, _: &[EvalStackTraceItem]) {
        tracing::debug!(message, "jsonnet trace");
    }

    fn native_call(
        &mut self,
        _: &mut Program<'p>,
        _: InternedStr<'p>,
        _: &[Value<'p>],
    ) -> Result<Value<'p>, NativeError> {
        Err(NativeError)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo(files: &[(&str, &str)]) -> Files {
        let mut repository = Files::default();
        for (path, text) in files {
            repository
                .entries
                .insert(path.to_string(), Entry::File(text.as_bytes().to_vec()));
        }
        repository
    }

    #[test]
    fn jsonnet_renders_natively_with_imports_and_ext_vars() {
        let repository = repo(&[
            (
                "lib/cm.libsonnet",
                "function(name) {apiVersion: 'v1', kind: 'ConfigMap', metadata: {name: name}}",
            ),
            (
                "apps/web/main.jsonnet",
                "local cm = import '../../lib/cm.libsonnet'; [cm('a'), cm(std.extVar('env'))]",
            ),
        ]);
        let options = JsonnetOptions {
            ext_vars: [("env".to_string(), "prod".to_string())].into(),
            ..Default::default()
        };
        let manifests = render(&repository, "apps/web", &options).unwrap();
        let names: Vec<String> = manifests.iter().map(|m| m.id.to_string()).collect();
        assert_eq!(names, vec!["ConfigMap a", "ConfigMap prod"]);
        assert_eq!(
            manifests[1].origin.to_string(),
            "apps/web/main.jsonnet (document 2)"
        );
    }

    #[test]
    fn jsonnet_imports_may_not_leave_the_repository() {
        let repository = repo(&[("main.jsonnet", "import '../../etc/x.libsonnet'")]);
        let error = render(&repository, "", &JsonnetOptions::default()).unwrap_err();
        assert!(
            error.to_string().starts_with("jsonnet: main.jsonnet: "),
            "{error}"
        );
        assert_eq!(join("a/b", "../../.."), None);
    }
}
