//! The supervisor's entry point: reads its command line (see `settings`) and runs.

#[cfg(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
fn main() {
    use sandbox_supervisor::{settings::Settings, supervise};
    let settings = match Settings::parse(std::env::args().skip(1)) {
        Ok(settings) => settings,
        Err(error) => {
            eprintln!("sandbox-supervisor: {error}");
            std::process::exit(2);
        }
    };
    if settings.probe {
        print!("{}", supervise::probe());
        return;
    }
    std::process::exit(supervise::run(settings));
}

#[cfg(not(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
)))]
fn main() {
    eprintln!("sandbox-supervisor runs on Linux (x86-64, aarch64) only");
    std::process::exit(2);
}
