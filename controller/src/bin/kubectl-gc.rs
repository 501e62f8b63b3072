//! `kubectl-gc`: the kubectl plugin (`kubectl gc explain deploy/web`); see `kube_gc::plugin`.

use clap::Parser;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    let args = kube_gc::plugin::Args::parse();
    let runtime =
        tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio runtime");
    match runtime.block_on(kube_gc::plugin::run(args)) {
        Ok(out) => {
            print!("{out}");
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {}", kube_gc::error::one_line(e.as_ref()));
            std::process::ExitCode::FAILURE
        }
    }
}
