//! Jsonnet, evaluated with `rsjsonnet-lang` in a child process: the
//! parent materializes the repository and runs `PROGRAM __render-jsonnet`
//! there (in the same sandbox, time and output limits as the other
//! renderers); the child limits its own address space first thing, reads
//! the files, evaluates and prints JSON. A program that allocates without
//! end then kills the child, not the controller. Imports resolve relative
//! to the importing file and may not leave the repository; symlinks are
//! not followed.
//!
//! The entry file may evaluate to one object, an array of objects, or an
//! object of objects (keyed by any name; emitted in key order).

use std::collections::{BTreeMap, HashMap};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use rsjsonnet_lang::arena::Arena;
use rsjsonnet_lang::interner::InternedStr;
use rsjsonnet_lang::program::{
    Callbacks, EvalStackTraceItem, ImportError, NativeError, Program, Thunk, Value,
};
use rsjsonnet_lang::span::{SpanContextId, SpanId};
use serde_json::Value as Json;

use super::{RenderError, Sandbox, materialize, process};
use crate::files::{Entry, Files};
use crate::limits::Budget;
use crate::manifest::{Manifest, ManifestError, Origin, identify};
use crate::spec::JsonnetOptions;

/// The first argument that makes `tether` (or `tether-render`) act as the
/// Jsonnet child: `PROGRAM __render-jsonnet MAX_MEMORY_BYTES`, with the
/// request on standard input, run in the repository's root.
pub const JSONNET_CHILD: &str = "__render-jsonnet";

/// What the parent asks of the child, as JSON on its standard input.
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Request {
    /// The entry file, relative to the repository root.
    main: String,
    ext_vars: BTreeMap<String, String>,
}

pub fn render(
    repository: &Files,
    path: &str,
    options: &JsonnetOptions,
    sandbox: &Sandbox,
    budget: &mut Budget,
) -> Result<Vec<Manifest>, RenderError> {
    let main = if options.main.is_empty() {
        "main.jsonnet"
    } else {
        options.main.as_str()
    };
    let main = join(path, main).ok_or_else(|| escape(main))?;
    let renderer = format!("jsonnet: {main}");
    let failed = |message: String| RenderError::Failed {
        renderer: "jsonnet".into(),
        message: format!("{main}: {message}"),
    };
    let (_temp, root) = materialize("jsonnet", repository)?;
    let request = Request {
        main: main.clone(),
        ext_vars: options.ext_vars.clone(),
    };
    let input = serde_json::to_string(&request).map_err(|e| failed(e.to_string()))?;
    let args = [
        JSONNET_CHILD.to_string(),
        sandbox.max_memory_bytes.to_string(),
    ];
    let run = process::Run {
        renderer: &renderer,
        root: &root,
        dir: &root,
        program: &sandbox.render_program,
        args: &args,
        input: Some(&input),
        memory_limited: true,
    };
    let output = process::run(&run, sandbox).map_err(|error| match error {
        // The child's own message already names the file.
        RenderError::Failed { message, .. } => RenderError::Failed {
            renderer: "jsonnet".into(),
            message: message
                .find(&format!("{main}: "))
                .map_or(message.clone(), |at| message[at..].to_string()),
        },
        other => other,
    })?;
    let file = PathBuf::from(&main);
    let json: Json = serde_json::from_slice(&output).map_err(|e| failed(e.to_string()))?;
    let objects = objects_of(json).map_err(failed)?;
    budget
        .objects(&file, objects.len())
        .map_err(ManifestError::from)?;
    let mut with_origins = Vec::with_capacity(objects.len());
    for (document, object) in objects.into_iter().enumerate() {
        budget
            .document(&file, 0, &object, false)
            .map_err(ManifestError::from)?;
        let origin = Origin {
            file: file.clone(),
            document,
            line: 0,
            item: None,
        };
        with_origins.push((origin, object));
    }
    Ok(identify(with_origins)?)
}

/// The objects a Jsonnet program's value declares.
fn objects_of(json: Json) -> Result<Vec<Json>, String> {
    Ok(match json {
        Json::Array(items) => items,
        Json::Object(map) if map.contains_key("apiVersion") || map.contains_key("kind") => {
            vec![Json::Object(map)]
        }
        Json::Object(map) => {
            let mut entries: Vec<(String, Json)> = map.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            entries.into_iter().map(|(_, v)| v).collect()
        }
        other => return Err(format!("evaluates to {other}, not objects")),
    })
}

/// The child's `main`: `args` are what follows [`JSONNET_CHILD`]. Limits
/// its own address space before reading anything, evaluates the request
/// read from standard input against the files under the current
/// directory, and prints the value as JSON. Exits 1 with the error on
/// standard error.
pub fn jsonnet_child(args: &[String]) -> ExitCode {
    match child(args) {
        Ok(json) => {
            let mut stdout = std::io::stdout().lock();
            if stdout.write_all(json.as_bytes()).is_err() || stdout.flush().is_err() {
                return ExitCode::FAILURE;
            }
            ExitCode::SUCCESS
        }
        Err(message) => {
            eprintln!("{message}");
            ExitCode::FAILURE
        }
    }
}

fn child(args: &[String]) -> Result<String, String> {
    let limit: u64 = args
        .first()
        .and_then(|text| text.parse().ok())
        .ok_or_else(|| format!("usage: {JSONNET_CHILD} MAX_MEMORY_BYTES < request.json"))?;
    // Set before the files are read: everything after runs under it.
    let limit = rustix::process::Rlimit {
        current: Some(limit),
        maximum: Some(limit),
    };
    rustix::process::setrlimit(rustix::process::Resource::As, limit)
        .map_err(|e| format!("cannot limit memory: {e}"))?;
    let mut input = String::new();
    std::io::stdin()
        .read_to_string(&mut input)
        .map_err(|e| format!("reading the request: {e}"))?;
    let request: Request =
        serde_json::from_str(&input).map_err(|e| format!("reading the request: {e}"))?;
    let repository = Files::read_dir(Path::new(".")).map_err(|e| e.to_string())?;
    evaluate(&repository, &request.main, &request.ext_vars)
        .map_err(|message| format!("{}: {message}", request.main))
}

/// Evaluates `main` (relative to the root of `repository`) and returns its
/// value as JSON text.
fn evaluate(
    repository: &Files,
    main: &str,
    ext_vars: &BTreeMap<String, String>,
) -> Result<String, String> {
    let arena = Arena::new();
    let mut program = Program::new(&arena);
    program.set_max_stack(500);
    for (name, value) in ext_vars {
        let thunk = program.value_to_thunk(&Value::string(value));
        let name = program.intern_str(name);
        program.add_ext_var(name, &thunk);
    }
    let mut loader = Loader {
        repository,
        files: HashMap::new(),
    };
    let thunk = loader
        .load(&mut program, main)
        .map_err(|_| "cannot load (missing, not UTF-8, or a syntax error)".to_string())?;
    let value = program
        .eval_value(&thunk, &mut loader)
        .map_err(|e| format!("{e:?}"))?;
    program
        .manifest_json(&value, false)
        .map_err(|e| format!("{e:?}"))
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
    fn jsonnet_evaluates_with_imports_and_ext_vars() {
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
        let ext_vars = [("env".to_string(), "prod".to_string())].into();
        let json = evaluate(&repository, "apps/web/main.jsonnet", &ext_vars).unwrap();
        let objects = objects_of(serde_json::from_str(&json).unwrap()).unwrap();
        let names: Vec<&str> = objects
            .iter()
            .map(|o| o["metadata"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, vec!["a", "prod"]);
    }

    #[test]
    fn jsonnet_imports_may_not_leave_the_repository() {
        let repository = repo(&[("main.jsonnet", "import '../../etc/x.libsonnet'")]);
        assert!(evaluate(&repository, "main.jsonnet", &BTreeMap::new()).is_err());
        assert_eq!(join("a/b", "../../.."), None);
    }

    #[test]
    fn an_object_of_objects_is_emitted_in_key_order() {
        let json = serde_json::json!({"b": {"kind": "B"}, "a": {"kind": "A"}});
        let kinds: Vec<Json> = objects_of(json)
            .unwrap()
            .into_iter()
            .map(|o| o["kind"].clone())
            .collect();
        assert_eq!(kinds, vec!["A", "B"]);
        assert!(objects_of(serde_json::json!(3)).is_err());
    }
}
