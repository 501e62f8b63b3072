//! The README's "Flags" table and kube-gc's command line agree: every flag `kube-gc` accepts
//! has a row, every flag a row names is accepted, and where the command line has a default the
//! row's "default" column states that default.

use std::collections::BTreeMap;

use clap::CommandFactory;
use kube_gc::flags::Flags;

/// The rows of the README's "Flags" table: (flag names, default column).
fn readme_rows() -> Vec<(Vec<String>, String)> {
    let readme = include_str!("../../README.md");
    let start = readme.find("\n### Flags\n").expect("the README has a Flags section");
    let section = &readme[start..];
    let end = section[1..].find("\n## ").map_or(section.len(), |i| i + 1);
    section[..end]
        .lines()
        .filter(|line| line.starts_with("| `-"))
        .map(|line| {
            let cells: Vec<&str> = line.split(" | ").collect();
            let names = flag_names(cells[0].trim_start_matches("| "));
            (names, cells[1].to_owned())
        })
        .collect()
}

/// The flags a row's first cell names, written `--a-b` / `-c` where `-c` stands for `--a-c`
/// (the base flag with as many trailing words replaced).
fn flag_names(cell: &str) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for part in cell.split(" / ") {
        let part = part.trim().trim_matches('`');
        let name = if let Some(long) = part.strip_prefix("--") {
            long.to_owned()
        } else if let Some(tail) = part.strip_prefix('-') {
            match names.first() {
                // A lone short flag (`-v`): clap names it by its long form, the same letter.
                None => tail.to_owned(),
                Some(base) => {
                    let words: Vec<&str> = base.split('-').collect();
                    let keep = words.len() - tail.split('-').count();
                    format!("{}-{tail}", words[..keep].join("-"))
                }
            }
        } else {
            panic!("not a flag in the Flags table: {part:?}");
        };
        names.push(name);
    }
    names
}

/// Every flag of the command line, by long name, with its default if it has one.
fn command_line_flags() -> BTreeMap<String, Option<String>> {
    Flags::command()
        .get_arguments()
        .filter_map(|arg| {
            let name = arg.get_long()?.to_owned();
            let default =
                arg.get_default_values().first().map(|v| v.to_string_lossy().into_owned());
            Some((name, default))
        })
        .collect()
}

#[test]
fn the_readme_documents_every_flag_and_only_flags_that_exist() {
    let documented: Vec<String> = readme_rows().into_iter().flat_map(|(names, _)| names).collect();
    let accepted = command_line_flags();
    let missing: Vec<&String> = accepted.keys().filter(|f| !documented.contains(f)).collect();
    assert!(missing.is_empty(), "flags without a row in the README's Flags table: {missing:?}");
    let unknown: Vec<&String> = documented.iter().filter(|f| !accepted.contains_key(*f)).collect();
    assert!(unknown.is_empty(), "README rows naming flags kube-gc does not accept: {unknown:?}");
}

#[test]
fn the_readme_states_each_default_the_command_line_has() {
    let accepted = command_line_flags();
    let mut checked = 0;
    for (names, default_cell) in readme_rows() {
        // One default per flag, in the row's order (`20 / 30`).
        let stated: Vec<String> =
            default_cell.split(" / ").map(|d| d.trim().trim_matches('`').to_owned()).collect();
        for (i, name) in names.iter().enumerate() {
            let Some(Some(default)) = accepted.get(name) else { continue };
            assert_eq!(
                stated.get(i),
                Some(default),
                "--{name}: the README states {default_cell:?}, the command line defaults to \
                 {default:?}"
            );
            checked += 1;
        }
    }
    // Most flags have a default: a parser that matched no row would check nothing.
    assert!(checked >= 20, "only {checked} defaults compared");
}

#[test]
fn abbreviated_flags_expand_from_the_first_of_the_row() {
    assert_eq!(
        flag_names("`--leader-elect-lease-duration` / `-renew-deadline` / `-retry-period`"),
        ["leader-elect-lease-duration", "leader-elect-renew-deadline", "leader-elect-retry-period"]
    );
    assert_eq!(
        flag_names("`--leader-elect-resource-name` / `-namespace`"),
        ["leader-elect-resource-name", "leader-elect-resource-namespace"]
    );
    assert_eq!(flag_names("`-v`"), ["v"]);
}
