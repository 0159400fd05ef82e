//! Compiles `proto/` with protox (a protobuf compiler written in Rust), so building flotilla
//! needs no system `protoc`. See docs/adr/0002-proto-compilation.md.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?).join("../../proto");
    let files = [
        "flotilla/v1/objects.proto",
        "flotilla/v1/scheduler.proto",
        "flotilla/v1/execution.proto",
        "flotilla/v1/dependencies.proto",
        "grpc/health/v1/health.proto",
    ];
    println!("cargo:rerun-if-changed={}", root.display());
    for file in &files {
        println!("cargo:rerun-if-changed={}", root.join(file).display());
    }
    let descriptors = protox::compile(files.iter().map(|f| root.join(f)), [&root])?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_fds(descriptors)?;
    Ok(())
}
