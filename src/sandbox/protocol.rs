//! The program as the core sends it: one [`ToBox`] frame of the wire format the box's
//! supervisor reads (written once, in the supervisor's crate, for both ends). What
//! comes back is frames too ([`sandbox_supervisor::wire::FromBox`]); `call` reads them.
//! Why the program goes in through the supervisor's stdin and not as a file upload: on
//! Docker 20.10 (API 1.41) an archive upload into a read-only container is refused
//! when `/sandbox` is a tmpfs, or lands under the mount, invisible to the code; the
//! supervisor writes the files into the real scratch space.

use super::files_in::InputFile;
use super::OutputTap;
use sandbox_supervisor::wire::{self, ToBox};

/// What one run or session call sends.
#[derive(Debug, Clone)]
pub struct Program {
    /// File name inside `/sandbox`, e.g. `main.py` (a session call has none).
    pub file: &'static str,
    pub code: Vec<u8>,
    pub env: Vec<(String, String)>,
    /// Where output also goes as it arrives.
    pub tap: Option<OutputTap>,
    /// A session call: its number, and whether its value is a promise to wait for.
    pub call: Option<(u64, bool)>,
    /// Files to write under `/sandbox` first.
    pub files: Vec<InputFile>,
}

impl Program {
    /// The frame the supervisor reads.
    pub fn frame(&self) -> Vec<u8> {
        let (call, awaits) = self.call.unwrap_or((0, false));
        ToBox::Program(wire::Program {
            file: self.file.to_string(),
            call,
            awaits,
            env: self.env.clone(),
            code: self.code.clone(),
            files: self
                .files
                .iter()
                .map(|file| (file.path.clone(), file.bytes.clone()))
                .collect(),
        })
        .encode()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_frame_carries_the_program_whole() {
        let program = Program {
            file: "main.py",
            code: "print('é')\n".as_bytes().to_vec(),
            env: vec![("A".into(), "it's \"x\"".into())],
            tap: None,
            call: Some((3, true)),
            files: vec![InputFile {
                path: "in/data.bin".into(),
                bytes: vec![0, 255],
            }],
        };
        let frame = program.frame();
        let Some(ToBox::Program(read)) = ToBox::read(&mut frame.as_slice()).unwrap() else {
            panic!("no program")
        };
        assert_eq!(read.file, "main.py");
        assert_eq!((read.call, read.awaits), (3, true));
        assert_eq!(read.code, program.code);
        assert_eq!(read.env, program.env);
        assert_eq!(read.files, [("in/data.bin".to_string(), vec![0, 255])]);
    }
}
