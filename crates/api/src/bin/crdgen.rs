//! `flotilla-crdgen [DIR]`: writes every flotilla CRD as YAML into DIR (default `deploy/crds`),
//! or prints them as one multi-document stream with `-`.

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let target = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "deploy/crds".to_owned());
    let rendered = match flotilla_api::crds::rendered() {
        Ok(rendered) => rendered,
        Err(e) => {
            eprintln!("flotilla-crdgen: rendering CRDs failed: {e}");
            return ExitCode::FAILURE;
        }
    };
    if target == "-" {
        for (_, yaml) in rendered {
            println!("---\n{yaml}");
        }
        return ExitCode::SUCCESS;
    }
    let dir = PathBuf::from(target);
    if let Err(e) = std::fs::create_dir_all(&dir) {
        eprintln!("flotilla-crdgen: cannot create {}: {e}", dir.display());
        return ExitCode::FAILURE;
    }
    for (name, yaml) in rendered {
        let path = dir.join(name);
        if let Err(e) = std::fs::write(&path, yaml) {
            eprintln!("flotilla-crdgen: cannot write {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
        println!("wrote {}", path.display());
    }
    ExitCode::SUCCESS
}
