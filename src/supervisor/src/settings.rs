//! The supervisor's command line, which the server writes when it starts a box:
//!
//! ```text
//! supervisor [--floor] [--protect] [--session] [--workdir DIR] [--figures DIR]
//!            [--write DIR]... [--write-file FILE]... [--read DIR]...
//!            [--relay PORT:SOCKET] [--files] [--max-files N] [--max-file-size BYTES]
//!            [--max-total-size BYTES] [--skip DIR]... -- INTERPRETER ARGS...
//! supervisor --probe
//! ```
//!
//! Nothing here is secret: the program can read it in `/proc/<pid>/cmdline`.

/// What the supervisor is told.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Settings {
    /// Print what this kernel offers and exit.
    pub probe: bool,
    /// No process and no program but the interpreter.
    pub floor: bool,
    /// The filesystem promise (writes only to the writable places, nothing under /proc
    /// writable) must hold: refuse to run where it cannot.
    pub protect: bool,
    /// Calls one after another (a session), rather than one program.
    pub session: bool,
    pub workdir: String,
    /// Where the interpreter saves the figures it draws.
    pub figures: String,
    pub writable: Vec<String>,
    pub writable_files: Vec<String>,
    /// When given, reading is limited to these (and the writable places).
    pub readable: Option<Vec<String>>,
    /// Relay `127.0.0.1:PORT` to the Unix socket (the egress proxy).
    pub relay: Option<(u16, String)>,
    /// Return the files the run created or changed.
    pub files: bool,
    pub max_files: usize,
    pub max_file_size: u64,
    pub max_total_size: u64,
    /// Folders of the working directory not to walk (mounts).
    pub skip: Vec<String>,
    pub interpreter: Vec<String>,
}

impl Settings {
    /// Reads the command line (without the program's own name).
    pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Settings, String> {
        let mut settings = Settings {
            workdir: "/sandbox".into(),
            figures: "/tmp/.code-sandbox-figures".into(),
            max_files: 10,
            max_file_size: 1 << 20,
            max_total_size: 4 << 20,
            ..Settings::default()
        };
        let mut args = args.into_iter();
        while let Some(arg) = args.next() {
            let mut value = |name: &str| args.next().ok_or_else(|| format!("{name} needs a value"));
            let number = |text: String, name: &str| {
                text.parse::<u64>()
                    .map_err(|_| format!("{name}: `{text}` is not a number"))
            };
            match arg.as_str() {
                "--probe" => settings.probe = true,
                "--floor" => settings.floor = true,
                "--protect" => settings.protect = true,
                "--session" => settings.session = true,
                "--files" => settings.files = true,
                "--workdir" => settings.workdir = value(&arg)?,
                "--figures" => settings.figures = value(&arg)?,
                "--write" => settings.writable.push(value(&arg)?),
                "--write-file" => settings.writable_files.push(value(&arg)?),
                "--read" => settings
                    .readable
                    .get_or_insert_with(Vec::new)
                    .push(value(&arg)?),
                "--skip" => settings.skip.push(value(&arg)?),
                "--max-files" => settings.max_files = number(value(&arg)?, &arg)? as usize,
                "--max-file-size" => settings.max_file_size = number(value(&arg)?, &arg)?,
                "--max-total-size" => settings.max_total_size = number(value(&arg)?, &arg)?,
                "--relay" => {
                    let text = value(&arg)?;
                    let (port, socket) = text.split_once(':').ok_or("--relay takes PORT:SOCKET")?;
                    let port = port
                        .parse()
                        .map_err(|_| format!("--relay: `{port}` is not a port"))?;
                    settings.relay = Some((port, socket.to_string()));
                }
                "--" => {
                    settings.interpreter = args.collect();
                    break;
                }
                other => return Err(format!("unknown option `{other}`")),
            }
        }
        if !settings.probe && settings.interpreter.is_empty() {
            return Err("no interpreter after `--`".into());
        }
        Ok(settings)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Settings, String> {
        Settings::parse(args.iter().map(|a| a.to_string()))
    }

    #[test]
    fn a_command_line_reads_back() {
        let settings = parse(&[
            "--floor",
            "--protect",
            "--write",
            "/sandbox",
            "--write",
            "/tmp",
            "--read",
            "/usr",
            "--relay",
            "3128:/run/x.sock",
            "--files",
            "--max-files",
            "3",
            "--",
            "/usr/bin/python3",
            "-c",
            "x",
        ])
        .unwrap();
        assert!(settings.floor && settings.protect && settings.files && !settings.session);
        assert_eq!(settings.writable, ["/sandbox", "/tmp"]);
        assert_eq!(settings.readable, Some(vec!["/usr".to_string()]));
        assert_eq!(settings.relay, Some((3128, "/run/x.sock".to_string())));
        assert_eq!(settings.max_files, 3);
        assert_eq!(settings.interpreter, ["/usr/bin/python3", "-c", "x"]);
    }

    #[test]
    fn mistakes_are_said() {
        assert!(parse(&["--floor"]).unwrap_err().contains("no interpreter"));
        assert!(parse(&["--max-files", "x", "--", "/p"])
            .unwrap_err()
            .contains("not a number"));
        assert!(parse(&["--nope", "--", "/p"])
            .unwrap_err()
            .contains("unknown option"));
        assert!(parse(&["--relay", "3128", "--", "/p"]).is_err());
        assert!(parse(&["--probe"]).unwrap().probe);
    }
}
