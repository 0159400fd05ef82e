# flotilla's front door. `just --list` shows every recipe.

# Build every binary.
build:
    cargo build --workspace --bins

# Run every test (the same command README.md and CI use).
test:
    cargo test --workspace --locked

# Formatting and lints, as CI checks them.
lint:
    cargo fmt --all -- --check
    cargo clippy --workspace --all-targets --locked -- -D warnings

# Regenerate deploy/crds (and the Helm chart's copy) from the Rust types in crates/api.
crds:
    cargo run -q -p flotilla-api --bin flotilla-crdgen -- deploy/crds
    cp deploy/crds/*.yaml deploy/helm/flotilla/crds/

# Run the embedded control plane with three members.
up *ARGS:
    cargo run --release -p flotilla -- up {{ARGS}}

# Propagation benchmarks (prints tables; not run in CI).
bench *ARGS:
    cargo run --release -p flotilla -- bench {{ARGS}}

# flotilla-apiserver storage and watch benchmarks (not run in CI).
bench-apiserver *ARGS:
    cargo build --release -p flotilla-apiserver --bins
    cargo run --release -p flotilla-apiserver --bin flotilla-apiserver-bench -- {{ARGS}}

# Fault-injection soak run (not run in CI; CI runs a small smoke).
soak *ARGS:
    cargo run --release -p flotilla -- soak {{ARGS}}

# Build the container image with every binary (docker/Dockerfile); TAG defaults to `dev`.
images TAG="dev" REPO="ghcr.io/flotilla-dev/flotilla":
    docker build -f docker/Dockerfile -t {{REPO}}:{{TAG}} .
