//! A chart archive (`.tgz`) unpacked into memory, safely: only regular
//! files, every path inside the chart's own top directory, and bounded in
//! size, so a hostile archive can neither write outside nor exhaust memory.

use std::io::Read;

use crate::files::{Entry, Files};

/// Uncompressed bytes a chart may hold (Helm's own limit is 20 MiB for the
/// archive; charts with vendored dependencies are larger once unpacked).
const MAX_BYTES: u64 = 64 << 20;
/// Files a chart may hold.
const MAX_FILES: usize = 20_000;

/// Unpacks `archive` (gzip-compressed tar with one top directory, the
/// chart's name) into files relative to that directory. `what` names the
/// archive in errors.
pub fn unpack(what: &str, archive: &[u8]) -> Result<Files, String> {
    let files = read(what, archive, Layout::ChartDirectory)?;
    if !files.entries.contains_key("Chart.yaml") {
        return Err(format!("{what}: no Chart.yaml in the chart's directory"));
    }
    Ok(files)
}

/// Unpacks an artifact's layer (gzip-compressed tar of a directory's
/// files, as `flux push artifact` makes it) into files relative to its
/// root.
pub fn unpack_tree(what: &str, archive: &[u8]) -> Result<Files, String> {
    read(what, archive, Layout::Tree)
}

/// Where an archive's files are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layout {
    /// All under one top directory, which is left out.
    ChartDirectory,
    /// At the root.
    Tree,
}

fn read(what: &str, archive: &[u8], layout: Layout) -> Result<Files, String> {
    let gzip = flate2::read::GzDecoder::new(archive);
    let mut tar = tar::Archive::new(gzip.take(MAX_BYTES + 1));
    let mut files = Files::default();
    let mut top: Option<String> = None;
    let entries = tar
        .entries()
        .map_err(|error| format!("{what}: not a gzip-compressed tar archive: {error}"))?;
    for entry in entries {
        let mut entry = entry.map_err(|error| format!("{what}: unreadable archive: {error}"))?;
        let path = entry
            .path()
            .map_err(|error| format!("{what}: an entry's path: {error}"))?
            .to_string_lossy()
            .into_owned();
        let kind = entry.header().entry_type();
        if kind.is_dir() || kind.is_pax_global_extensions() || kind.is_pax_local_extensions() {
            continue;
        }
        if !kind.is_file() {
            return Err(format!(
                "{what}: {path} is not a regular file ({kind:?}); only files are read"
            ));
        }
        let rest = match layout {
            Layout::Tree => relative(&path)
                .ok_or_else(|| format!("{what}: {path} climbs out of the artifact"))?,
            Layout::ChartDirectory => {
                let (first, rest) = split_top(&path)
                    .ok_or_else(|| format!("{what}: {path} is outside the chart's directory"))?;
                if top.get_or_insert_with(|| first.to_string()) != first {
                    return Err(format!(
                        "{what}: {path} is outside the chart's directory {}",
                        top.unwrap_or_default()
                    ));
                }
                rest
            }
        };
        if files.entries.len() >= MAX_FILES {
            return Err(format!("{what}: more than {MAX_FILES} files"));
        }
        let mut bytes = Vec::new();
        entry
            .read_to_end(&mut bytes)
            .map_err(|error| format!("{what}: reading {path}: {error}"))?;
        files.entries.insert(rest.to_string(), Entry::File(bytes));
    }
    if files.entries.values().map(size).sum::<u64>() > MAX_BYTES {
        return Err(format!(
            "{what}: more than {} MiB unpacked",
            MAX_BYTES >> 20
        ));
    }
    Ok(files)
}

/// A relative path without `.`/`..` components (a leading `./` dropped).
fn relative(path: &str) -> Option<&str> {
    let path = path.strip_prefix("./").unwrap_or(path);
    let climbs = path.starts_with('/') || path.split('/').any(|part| part == ".." || part == ".");
    (!climbs && !path.is_empty()).then_some(path)
}

/// `top/rest` of a relative path without `.`/`..` components, or `None`.
fn split_top(path: &str) -> Option<(&str, &str)> {
    let (top, rest) = relative(path)?.split_once('/')?;
    (!top.is_empty() && !rest.is_empty()).then_some((top, rest))
}

fn size(entry: &Entry) -> u64 {
    match entry {
        Entry::File(bytes) => bytes.len() as u64,
        Entry::Symlink(target) => target.len() as u64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn archive(entries: &[(&str, &[u8])]) -> Vec<u8> {
        let mut builder = tar::Builder::new(flate2::write::GzEncoder::new(
            Vec::new(),
            flate2::Compression::fast(),
        ));
        for (path, bytes) in entries {
            let mut header = tar::Header::new_gnu();
            header.set_size(bytes.len() as u64);
            header.set_mode(0o644);
            header.set_entry_type(tar::EntryType::Regular);
            // Written raw, so that hostile names reach the reader as they are.
            let name = &mut header.as_old_mut().name;
            name[..path.len()].copy_from_slice(path.as_bytes());
            header.set_cksum();
            builder.append(&header, *bytes).unwrap();
        }
        builder.into_inner().unwrap().finish().unwrap()
    }

    #[test]
    fn a_chart_unpacks_relative_to_its_top_directory() {
        let bytes = archive(&[
            ("web/Chart.yaml", b"name: web\nversion: 1.2.3\n"),
            ("web/templates/cm.yaml", b"kind: ConfigMap\n"),
        ]);
        let files = unpack("web-1.2.3.tgz", &bytes).unwrap();
        assert_eq!(files.paths(), ["Chart.yaml", "templates/cm.yaml"]);
    }

    #[test]
    fn an_entry_that_climbs_out_or_sits_beside_the_chart_is_refused() {
        for hostile in ["web/../../etc/passwd", "/etc/passwd", "other/Chart.yaml"] {
            let bytes = archive(&[("web/Chart.yaml", b"name: web\n"), (hostile, b"x")]);
            let error = unpack("web.tgz", &bytes).unwrap_err();
            assert!(
                error.contains("outside the chart's directory"),
                "{hostile}: {error}"
            );
        }
    }

    #[test]
    fn an_artifact_unpacks_at_its_root_and_an_entry_that_climbs_out_is_refused() {
        let bytes = archive(&[
            ("./deploy.yaml", b"kind: ConfigMap\n"),
            ("base/kustomization.yaml", b"resources: []\n"),
        ]);
        let files = unpack_tree("shop:latest", &bytes).unwrap();
        assert_eq!(files.paths(), ["base/kustomization.yaml", "deploy.yaml"]);
        let bytes = archive(&[("../evil.yaml", b"x")]);
        let error = unpack_tree("shop:latest", &bytes).unwrap_err();
        assert!(error.contains("climbs out"), "{error}");
    }

    #[test]
    fn garbage_and_a_chart_without_chart_yaml_are_named() {
        let error = unpack("web.tgz", b"not gzip at all").unwrap_err();
        assert!(error.starts_with("web.tgz: "), "{error}");
        let error = unpack("web.tgz", &archive(&[("web/values.yaml", b"a: 1\n")])).unwrap_err();
        assert!(error.contains("no Chart.yaml"), "{error}");
    }
}
