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
//! object of objects (keyed by any name; emitted in key order) — or to a
//! function, which is called with the top-level arguments (`tlas`,
//! `tlaCode`) and must return one of those.

use std::collections::{BTreeMap, HashMap};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use rsjsonnet_lang::arena::Arena;
use rsjsonnet_lang::interner::InternedStr;
use rsjsonnet_lang::program::{
    Callbacks, EvalError, EvalErrorKind, EvalStackTraceItem, ImportError, NativeError, Program,
    Thunk, Value,
};
use rsjsonnet_lang::span::{SpanContextId, SpanId};
use serde_json::Value as Json;

use super::{RenderError, Sandbox, materialize, process};
use crate::files::{Entry, Files, join};
use crate::limits::Budget;
use crate::manifest::{Manifest, ManifestError, Origin, identify};
use crate::spec::JsonnetOptions;

/// The first argument that makes `tether` (or `tether-render`) act as the
/// Jsonnet child: `PROGRAM __render-jsonnet MAX_MEMORY_BYTES`, with the
/// request on standard input, run in the repository's root.
pub const JSONNET_CHILD: &str = "__render-jsonnet";

/// What the parent asks of the child, as JSON on its standard input.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Request {
    /// The entry file, relative to the repository root.
    main: String,
    /// External variables and top-level arguments, as strings and as code
    /// (see [`JsonnetOptions`]).
    #[serde(default)]
    ext_vars: BTreeMap<String, String>,
    #[serde(default)]
    ext_code: BTreeMap<String, String>,
    #[serde(default)]
    tlas: BTreeMap<String, String>,
    #[serde(default)]
    tla_code: BTreeMap<String, String>,
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
        ext_code: options.ext_code.clone(),
        tlas: options.tlas.clone(),
        tla_code: options.tla_code.clone(),
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
    evaluate(&repository, &request).map_err(|message| format!("{}: {message}", request.main))
}

/// Evaluates the request's entry file (relative to the root of
/// `repository`), calling it with the top-level arguments if it is a
/// function, and returns its value as JSON text.
fn evaluate(repository: &Files, request: &Request) -> Result<String, String> {
    let main = request.main.as_str();
    let arena = Arena::new();
    let mut program = Program::new(&arena);
    program.set_max_stack(500);
    let mut loader = Loader {
        repository,
        files: HashMap::new(),
    };
    let ext_vars = bindings(
        &mut program,
        &mut loader,
        main,
        Binding::EXT_VAR,
        (&request.ext_vars, &request.ext_code),
    )?;
    for (name, thunk) in &ext_vars {
        program.add_ext_var(*name, thunk);
    }
    let tlas = bindings(
        &mut program,
        &mut loader,
        main,
        Binding::TLA,
        (&request.tlas, &request.tla_code),
    )?;
    let thunk = loader
        .load(&mut program, main)
        .map_err(|_| "cannot load (missing, not UTF-8, or a syntax error)".to_string())?;
    let mut value = program
        .eval_value(&thunk, &mut loader)
        .map_err(|e| describe(&e))?;
    if value.is_function() {
        value = program
            .eval_call(&thunk, &[], &tlas, &mut loader)
            .map_err(|e| describe(&e))?;
    }
    program
        .manifest_json(&value, false)
        .map_err(|e| describe(&e))
}

/// External variables or top-level arguments: what the spec calls them.
struct Binding {
    /// As the error names one (`external variable`, `top-level argument`).
    what: &'static str,
    /// The spec's fields for string and code values.
    fields: (&'static str, &'static str),
}

impl Binding {
    const EXT_VAR: Binding = Binding {
        what: "external variable",
        fields: ("extVars", "extCode"),
    };
    const TLA: Binding = Binding {
        what: "top-level argument",
        fields: ("tlas", "tlaCode"),
    };
}

/// Thunks for named values given as strings and as code. Code is loaded
/// as if it were in `main` (its imports are relative to it). A name given
/// both ways is an error that names it and both fields.
fn bindings<'p>(
    program: &mut Program<'p>,
    loader: &mut Loader<'_>,
    main: &str,
    binding: Binding,
    (strings, code): (&BTreeMap<String, String>, &BTreeMap<String, String>),
) -> Result<Vec<(InternedStr<'p>, Thunk<'p>)>, String> {
    let mut thunks = Vec::with_capacity(strings.len() + code.len());
    for (name, value) in strings {
        if code.contains_key(name) {
            let (string_field, code_field) = binding.fields;
            return Err(format!(
                "{} `{name}` is set both in {string_field} and in {code_field}",
                binding.what
            ));
        }
        let thunk = program.value_to_thunk(&Value::string(value));
        thunks.push((program.intern_str(name), thunk));
    }
    for (name, text) in code {
        let thunk = loader.load_code(program, main, name, text).map_err(|_| {
            format!(
                "{} `{name}` ({}): not valid Jsonnet",
                binding.what, binding.fields.1
            )
        })?;
        thunks.push((program.intern_str(name), thunk));
    }
    Ok(thunks)
}

/// An evaluation error in words: the top-level call's errors name the
/// parameter; the rest keep the evaluator's own description.
fn describe(error: &EvalError) -> String {
    match &error.kind {
        // The top-level call is the only one without a call site.
        EvalErrorKind::CallParamNotBound {
            param_name,
            span: None,
        } => {
            format!("top-level argument `{param_name}` is required: set it in tlas or tlaCode")
        }
        EvalErrorKind::UnknownCallParam {
            param_name,
            span: None,
        } => {
            format!(
                "top-level argument `{param_name}` is not a parameter of the program's function"
            )
        }
        EvalErrorKind::CallParamNotBound { param_name, .. } => {
            format!("a function is called without its parameter `{param_name}`")
        }
        EvalErrorKind::UnknownExtVar { name } => {
            format!("external variable `{name}` is not set: set it in extVars or extCode")
        }
        EvalErrorKind::ManifestFunction => "evaluates to a function, not objects".into(),
        kind => format!("{kind:?}"),
    }
}

fn escape(path: &str) -> RenderError {
    RenderError::PathEscape {
        path: path.into(),
        reason: "jsonnet import escapes the repository".into(),
    }
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

    /// Loads Jsonnet `code` given in the spec for `name`, as if it were
    /// written in `main`.
    fn load_code<'p>(
        &mut self,
        program: &mut Program<'p>,
        main: &str,
        name: &str,
        code: &str,
    ) -> Result<Thunk<'p>, ImportError> {
        let (context, _) = program.span_manager_mut().insert_source_context(code.len());
        self.files.insert(context, main.to_string());
        program
            .load_source(context, code.as_bytes(), true, &format!("<code {name}>"))
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
        let request = Request {
            main: "apps/web/main.jsonnet".into(),
            ext_vars: map(&[("env", "prod")]),
            ..Request::default()
        };
        let json = evaluate(&repository, &request).unwrap();
        let objects = objects_of(serde_json::from_str(&json).unwrap()).unwrap();
        let names: Vec<&str> = objects
            .iter()
            .map(|o| o["metadata"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, vec!["a", "prod"]);
    }

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn main(path: &str) -> Request {
        Request {
            main: path.into(),
            ..Request::default()
        }
    }

    /// `function(env, replicas=1)` returning one ConfigMap that shows both.
    const FUNCTION: &str = "function(env, replicas=1) {apiVersion: 'v1', kind: 'ConfigMap', \
        metadata: {name: env}, data: {replicas: std.toString(replicas), type: std.type(replicas)}}";

    /// `main.jsonnet` called with top-level arguments `tlas` (strings) and
    /// `tla_code` (Jsonnet).
    fn main_with(tlas: &[(&str, &str)], tla_code: &[(&str, &str)]) -> Request {
        Request {
            tlas: map(tlas),
            tla_code: map(tla_code),
            ..main("main.jsonnet")
        }
    }

    #[test]
    fn a_function_is_called_with_string_and_code_top_level_arguments() {
        let repository = repo(&[("main.jsonnet", FUNCTION)]);
        let with = |tlas: &[(&str, &str)], tla_code: &[(&str, &str)]| {
            let request = main_with(tlas, tla_code);
            let json: Json = serde_json::from_str(&evaluate(&repository, &request)?).unwrap();
            Ok::<_, String>(json)
        };
        let defaulted = with(&[("env", "prod")], &[]).unwrap();
        assert_eq!(defaulted["metadata"]["name"], "prod");
        assert_eq!(defaulted["data"]["replicas"], "1");
        let as_code = with(&[("env", "prod")], &[("replicas", "1 + 2")]).unwrap();
        assert_eq!(as_code["data"]["replicas"], "3");
        assert_eq!(as_code["data"]["type"], "number");
        let as_string = with(&[("env", "prod"), ("replicas", "3")], &[]).unwrap();
        assert_eq!(as_string["data"]["type"], "string");
    }

    #[test]
    fn a_missing_or_unknown_or_doubly_set_top_level_argument_is_named() {
        let repository = repo(&[("main.jsonnet", FUNCTION)]);
        let error = |tlas: &[(&str, &str)], tla_code: &[(&str, &str)]| {
            let request = main_with(tlas, tla_code);
            evaluate(&repository, &request).unwrap_err()
        };
        assert_eq!(
            error(&[], &[]),
            "top-level argument `env` is required: set it in tlas or tlaCode"
        );
        assert_eq!(
            error(&[("env", "a"), ("size", "1")], &[]),
            "top-level argument `size` is not a parameter of the program's function"
        );
        assert_eq!(
            error(&[("env", "a")], &[("env", "'b'")]),
            "top-level argument `env` is set both in tlas and in tlaCode"
        );
        assert_eq!(
            error(&[("env", "a")], &[("replicas", "{")]),
            "top-level argument `replicas` (tlaCode): not valid Jsonnet"
        );
    }

    #[test]
    fn external_variables_may_be_code_that_imports_next_to_the_entry_file() {
        let repository = repo(&[
            ("apps/web/sizes.libsonnet", "{small: 1, large: 5}"),
            (
                "apps/web/main.jsonnet",
                "{apiVersion: 'v1', kind: 'ConfigMap', metadata: {name: std.extVar('env')}, \
                 data: {replicas: std.toString(std.extVar('sizes').large)}}",
            ),
        ]);
        let request = Request {
            ext_vars: map(&[("env", "prod")]),
            ext_code: map(&[("sizes", "import 'sizes.libsonnet'")]),
            ..main("apps/web/main.jsonnet")
        };
        let json: Json = serde_json::from_str(&evaluate(&repository, &request).unwrap()).unwrap();
        assert_eq!(json["data"]["replicas"], "5");
        let unset = evaluate(&repository, &main("apps/web/main.jsonnet")).unwrap_err();
        assert!(
            unset.starts_with("external variable `")
                && unset.ends_with("` is not set: set it in extVars or extCode"),
            "{unset}"
        );
    }

    #[test]
    fn jsonnet_imports_may_not_leave_the_repository() {
        let repository = repo(&[("main.jsonnet", "import '../../etc/x.libsonnet'")]);
        assert!(evaluate(&repository, &main("main.jsonnet")).is_err());
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
