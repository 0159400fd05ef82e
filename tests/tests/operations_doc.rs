//! `docs/operations.md` documents every flag and environment variable of every binary: the
//! test reads each binary's `--help` (and each `flotilla` subcommand's) and fails on a flag or
//! `[env: ...]` variable missing from that binary's section of the doc.

#![allow(clippy::unwrap_used)] // Tests may panic on unexpected results.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;

use flotilla_e2e::binaries::binary;

const SERVICES: [&str; 5] = [
    "flotilla-detector",
    "flotilla-scheduler",
    "flotilla-dependency-distributor",
    "flotilla-execution",
    "flotilla-apiserver",
];

fn doc() -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/operations.md");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn help(name: &str, subcommand: Option<&str>) -> String {
    let mut command = Command::new(binary(name));
    command.args(subcommand).arg("--help");
    let output = command.output().unwrap();
    assert!(output.status.success(), "{name} {subcommand:?} --help failed");
    String::from_utf8(output.stdout).unwrap()
}

/// The long flags (`--grpc-addr`) and `[env: NAME=]` variables a clap help text lists, except
/// `--help` and `--version`.
fn flags_and_env(help: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in help.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with('-')
            && let Some(flag) = trimmed
                .split_whitespace()
                .map(|t| t.trim_end_matches(','))
                .find(|t| t.starts_with("--"))
        {
            let flag = flag.split(['=', '[']).next().unwrap();
            if flag != "--help" && flag != "--version" {
                out.insert(flag.to_owned());
            }
        }
        let mut rest = line;
        while let Some(start) = rest.find("[env: ") {
            let tail = &rest[start + "[env: ".len()..];
            let end = tail.find(['=', ']']).unwrap_or(tail.len());
            out.insert(tail[..end].to_owned());
            rest = &tail[end..];
        }
    }
    out
}

/// The text of the doc's `### <title>` section (up to the next heading of level 2 or 3).
fn section<'a>(doc: &'a str, title: &str) -> &'a str {
    let heading = format!("### {title}\n");
    let start = doc
        .find(&heading)
        .unwrap_or_else(|| panic!("docs/operations.md has no section \"### {title}\""))
        + heading.len();
    let rest = &doc[start..];
    let end = rest
        .find("\n## ")
        .into_iter()
        .chain(rest.find("\n### "))
        .min()
        .unwrap_or(rest.len());
    &rest[..end]
}

/// The flags a section's configuration table documents (rows starting with `` | `--flag``).
fn documented_flags(section: &str) -> BTreeSet<String> {
    section
        .lines()
        .filter_map(|line| line.strip_prefix("| `--"))
        .filter_map(|rest| rest.split([' ', '`', '=']).next())
        .map(|flag| format!("--{flag}"))
        .collect()
}

/// The subcommands `flotilla --help` lists (without `help`).
fn subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(str::to_owned)
        .collect()
}

#[test]
fn every_flag_and_env_var_of_every_binary_is_documented() {
    let doc = doc();
    let mut missing = Vec::new();
    let mut check = |title: String, help: String| {
        let section = section(&doc, &title);
        let listed = flags_and_env(&help);
        for item in &listed {
            if !section.contains(&format!("`{item}")) {
                missing.push(format!("{title}: {item}"));
            }
        }
        // And the other way round: a documented flag the binary no longer has.
        for flag in documented_flags(section) {
            if !listed.contains(&flag) {
                missing.push(format!("{title}: {flag} is documented but not in --help"));
            }
        }
    };
    for service in SERVICES {
        check(format!("`{service}`"), help(service, None));
    }
    let cli = help("flotilla", None);
    let commands = subcommands(&cli);
    assert!(commands.contains(&"up".to_owned()), "{cli}");
    for command in commands {
        check(format!("`flotilla {command}`"), help("flotilla", Some(&command)));
    }
    assert!(
        missing.is_empty(),
        "docs/operations.md and the binaries' --help disagree (document flags as `--flag` / `ENV_VAR` in the binary's section):\n{}",
        missing.join("\n")
    );
}

#[test]
fn documented_flags_are_read_from_table_rows() {
    let section = "Intro `--not-a-row`.\n| flag | default |\n|---|---|\n| `--grpc-addr ADDR` | x |\n| `--sharding` | off |\n| `--a=b` | |\n| `KUBECONFIG` | |\n";
    let found: Vec<String> = documented_flags(section).into_iter().collect();
    assert_eq!(found, ["--a", "--grpc-addr", "--sharding"]);
}

#[test]
fn help_parsing_finds_flags_and_env_vars() {
    let help = "Options:\n      --kubeconfig <KUBECONFIG>\n          Kubeconfig\n          [env: KUBECONFIG=]\n  -h, --help\n  -q, --quiet-mode\n      --data-dir <DATA_DIR>  Directory [env: FLOTILLA_APISERVER_DATA_DIR=]\n";
    let found: Vec<String> = flags_and_env(help).into_iter().collect();
    assert_eq!(
        found,
        [
            "--data-dir",
            "--kubeconfig",
            "--quiet-mode",
            "FLOTILLA_APISERVER_DATA_DIR",
            "KUBECONFIG"
        ]
    );
    assert_eq!(
        subcommands("Usage: x\n\nCommands:\n  join  J\n  up    U\n  help  H\n\nOptions:\n"),
        ["join", "up"]
    );
}
