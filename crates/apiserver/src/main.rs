//! `flotilla-apiserver`: parses flags and runs the server (the logic lives in the library).

use clap::Parser;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let config = flotilla_apiserver::Config::parse();
    flotilla_apiserver::init_logging(&config.log_format, &config.log_level);
    flotilla_apiserver::run(config).await
}
