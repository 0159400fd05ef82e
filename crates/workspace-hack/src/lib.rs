//! # flotilla-workspace-hack
//!
//! No code: a dependency of every workspace member whose `Cargo.toml` enables, for the
//! third-party crates whose features used to differ between ways of building, the union of
//! those features. With it, `cargo run -p flotilla -- up`, the services `flotilla up` builds,
//! `cargo build --workspace` and `cargo test` compile each dependency once and reuse it (see
//! `docs/adr/0009-one-build-for-every-command.md`). `tests/unified.rs` checks that they agree.
