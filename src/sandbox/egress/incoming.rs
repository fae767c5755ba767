//! The client's side of a connection as the proxy reads it: request heads, and bodies
//! forwarded by their framing (so that bytes after a body are read as the next
//! request, checked like the first, and never reach the server unchecked).
//!
//! A chunked body is read as strictly as a head: chunk-size lines and trailers end in
//! CRLF, sizes are hex digits that fit, and each chunk's data ends in CRLF.

use super::head::Framing;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// The largest request head read before the request is refused.
pub const MAX_HEAD: usize = 32 * 1024;
/// The longest chunk-size line, and the most trailer bytes.
const MAX_CHUNK_LINE: usize = 4 * 1024;
const MAX_TRAILERS: usize = 16 * 1024;
const CHUNK: usize = 16 * 1024;

/// A reader with the bytes it read ahead.
pub struct Incoming<R> {
    reader: R,
    pending: Vec<u8>,
}

/// Why reading stopped.
#[derive(Debug)]
pub enum ReadError {
    /// The bytes are not what HTTP allows here: the reason, for a 400.
    Malformed(String),
    Io(std::io::Error),
}

impl From<std::io::Error> for ReadError {
    fn from(error: std::io::Error) -> ReadError {
        ReadError::Io(error)
    }
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::Malformed(why) => f.write_str(why),
            ReadError::Io(error) => write!(f, "{error}"),
        }
    }
}

fn malformed<T>(why: impl Into<String>) -> Result<T, ReadError> {
    Err(ReadError::Malformed(why.into()))
}

impl<R: AsyncRead + Unpin> Incoming<R> {
    pub fn new(reader: R, pending: Vec<u8>) -> Incoming<R> {
        Incoming { reader, pending }
    }

    /// What was read ahead, and the reader.
    pub fn into_parts(self) -> (R, Vec<u8>) {
        (self.reader, self.pending)
    }

    /// Reads more; false at the end of the stream.
    async fn fill(&mut self) -> std::io::Result<bool> {
        let mut chunk = [0u8; CHUNK];
        let read = self.reader.read(&mut chunk).await?;
        self.pending.extend_from_slice(&chunk[..read]);
        Ok(read > 0)
    }

    /// Whether anything is there to read, waiting for the first byte if need be; false
    /// when the stream ended first.
    pub async fn has_more(&mut self) -> std::io::Result<bool> {
        if !self.pending.is_empty() {
            return Ok(true);
        }
        self.fill().await
    }

    /// The bytes read so far and not taken (without waiting for more).
    pub fn peek(&self) -> &[u8] {
        &self.pending
    }

    /// Reads at least `n` bytes ahead (fewer at the end of the stream).
    pub async fn fill_to(&mut self, n: usize) -> std::io::Result<()> {
        while self.pending.len() < n {
            if !self.fill().await? {
                break;
            }
        }
        Ok(())
    }

    /// The next request head (through its empty line); `None` when the stream ends
    /// before its first byte.
    pub async fn read_head(&mut self) -> Result<Option<Vec<u8>>, ReadError> {
        let mut searched: usize = 0;
        loop {
            let from = searched.saturating_sub(3);
            if let Some(at) = self.pending[from..]
                .windows(4)
                .position(|w| w == b"\r\n\r\n")
            {
                let end = from + at + 4;
                return Ok(Some(self.pending.drain(..end).collect()));
            }
            searched = self.pending.len();
            if searched > MAX_HEAD {
                return malformed(format!("a request head over {} KiB", MAX_HEAD / 1024));
            }
            if !self.fill().await? {
                if self.pending.is_empty() {
                    return Ok(None);
                }
                return malformed("the connection closed inside a request head");
            }
        }
    }

    /// One line through its CRLF (a bare LF is an error), at most `limit` bytes.
    async fn read_line(&mut self, limit: usize) -> Result<Vec<u8>, ReadError> {
        loop {
            if let Some(at) = self.pending.iter().position(|&b| b == b'\n') {
                if at == 0 || self.pending[at - 1] != b'\r' {
                    return malformed("a bare LF in a chunked body");
                }
                let line: Vec<u8> = self.pending.drain(..=at).collect();
                if line[..line.len() - 2].contains(&b'\r') {
                    return malformed("a bare CR in a chunked body");
                }
                return Ok(line);
            }
            if self.pending.len() > limit {
                return malformed("a chunk-size or trailer line too long");
            }
            if !self.fill().await? {
                return malformed("the connection closed inside a chunked body");
            }
        }
    }

    /// Copies exactly `n` bytes to `out`.
    async fn copy_exact<W: AsyncWrite + Unpin>(
        &mut self,
        mut n: u64,
        out: &mut W,
    ) -> Result<(), ReadError> {
        while n > 0 {
            if self.pending.is_empty() && !self.fill().await? {
                return malformed("the connection closed inside a request body");
            }
            let take = self
                .pending
                .len()
                .min(usize::try_from(n).unwrap_or(usize::MAX));
            out.write_all(&self.pending[..take]).await?;
            self.pending.drain(..take);
            n -= take as u64;
        }
        Ok(())
    }

    /// Copies the body framed by `framing` to `out`, checking a chunked body's framing
    /// as it goes; what follows it stays to be read as the next request.
    pub async fn forward_body<W: AsyncWrite + Unpin>(
        &mut self,
        framing: Framing,
        out: &mut W,
    ) -> Result<(), ReadError> {
        match framing {
            Framing::None => Ok(()),
            Framing::Length(n) => self.copy_exact(n, out).await,
            Framing::Chunked => loop {
                let line = self.read_line(MAX_CHUNK_LINE).await?;
                let size = chunk_size(&line[..line.len() - 2])?;
                out.write_all(&line).await?;
                if size == 0 {
                    return self.forward_trailers(out).await;
                }
                self.copy_exact(size, out).await?;
                let end = self.read_line(2).await?;
                if end != b"\r\n" {
                    return malformed("a chunk's data is not followed by CRLF");
                }
                out.write_all(&end).await?;
            },
        }
    }

    async fn forward_trailers<W: AsyncWrite + Unpin>(
        &mut self,
        out: &mut W,
    ) -> Result<(), ReadError> {
        let mut total = 0;
        loop {
            let line = self.read_line(MAX_TRAILERS).await?;
            total += line.len();
            if total > MAX_TRAILERS {
                return malformed("trailers too long");
            }
            let content = &line[..line.len() - 2];
            if !content.is_empty() {
                if content.starts_with(b" ") || content.starts_with(b"\t") {
                    return malformed("a trailer line continued on the next (obs-fold)");
                }
                let name_end = content.iter().position(|&b| b == b':');
                let name_ok = name_end.is_some_and(|end| {
                    end > 0
                        && content[..end]
                            .iter()
                            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(b))
                });
                if !name_ok {
                    return malformed("a trailer line is not `name: value`");
                }
            }
            out.write_all(&line).await?;
            if content.is_empty() {
                return Ok(());
            }
        }
    }
}

/// A chunk-size line without its CRLF: hex digits, then optional `;extensions`.
fn chunk_size(line: &[u8]) -> Result<u64, ReadError> {
    let digits_end = line
        .iter()
        .position(|b| !b.is_ascii_hexdigit())
        .unwrap_or(line.len());
    let (digits, rest) = line.split_at(digits_end);
    if digits.is_empty() || digits.len() > 15 {
        return malformed("a chunk size is not 1 to 15 hex digits");
    }
    if !rest.is_empty() && rest[0] != b';' {
        return malformed("a chunk size is followed by something other than `;` extensions");
    }
    if rest.iter().any(|&b| b < 0x20 && b != b'\t' || b == 0x7f) {
        return malformed("control characters in a chunk extension");
    }
    let digits = std::str::from_utf8(digits).expect("hex digits");
    Ok(u64::from_str_radix(digits, 16).expect("at most 15 hex digits fit"))
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn forward(input: &[u8], framing: Framing) -> (Result<(), String>, Vec<u8>, Vec<u8>) {
        let mut incoming = Incoming::new(input, Vec::new());
        let mut out = Vec::new();
        let result = incoming
            .forward_body(framing, &mut out)
            .await
            .map_err(|e| e.to_string());
        let (_, rest) = incoming.into_parts();
        (result, out, rest)
    }

    #[tokio::test]
    async fn bodies_end_where_their_framing_says() {
        let (result, body, rest) = forward(b"helloGET / HTTP/1.1\r\n", Framing::Length(5)).await;
        assert_eq!((result, body.as_slice()), (Ok(()), b"hello".as_slice()));
        // What follows is left to be read (and checked) as the next request.
        let mut incoming = Incoming::new(&b"GET / HTTP/1.1\r\n"[..], rest);
        assert!(incoming.read_head().await.is_err(), "an unfinished head");
        let chunked = b"5;ext=1\r\nhello\r\n0\r\nX-T: 1\r\n\r\nGET /next HTTP/1.1\r\n\r\n";
        let (result, body, rest) = forward(chunked, Framing::Chunked).await;
        assert_eq!(result, Ok(()));
        assert_eq!(body, b"5;ext=1\r\nhello\r\n0\r\nX-T: 1\r\n\r\n");
        let mut incoming = Incoming::new(&b""[..], rest);
        assert_eq!(
            incoming.read_head().await.unwrap().unwrap(),
            b"GET /next HTTP/1.1\r\n\r\n"
        );
        assert!(incoming.read_head().await.unwrap().is_none());
    }

    #[tokio::test]
    async fn chunked_bodies_in_disguise_are_refused() {
        for (input, why) in [
            (&b"5\nhello\r\n0\r\n\r\n"[..], "bare LF"),
            (b"5\r\nhello\n0\r\n\r\n", "bare LF"),
            (b"5\r\nhelloX\r\n0\r\n\r\n", "not followed by CRLF"),
            (b"-5\r\nhello\r\n0\r\n\r\n", "hex digits"),
            (b"0x5\r\nhello\r\n0\r\n\r\n", "other than `;`"),
            (b"5 \r\nhello\r\n0\r\n\r\n", "other than `;`"),
            (b"ffffffffffffffffff\r\n", "hex digits"),
            (b"5\r\nhel", "closed inside"),
            (b"0\r\n bad\r\n\r\n", "obs-fold"),
            (b"0\r\nno colon\r\n\r\n", "name: value"),
            (b"0\r\nX: 1\rY: 2\r\n\r\n", "bare CR"),
        ] {
            let (result, _, _) = forward(input, Framing::Chunked).await;
            let error = result.unwrap_err();
            assert!(
                error.contains(why),
                "{:?}: {error}",
                String::from_utf8_lossy(input)
            );
        }
        let (result, _, _) = forward(b"abc", Framing::Length(5)).await;
        assert!(result.unwrap_err().contains("closed inside"));
    }

    #[tokio::test]
    async fn heads_are_bounded_and_end_with_an_empty_line() {
        let long = vec![b'a'; MAX_HEAD + 10];
        let mut incoming = Incoming::new(long.as_slice(), Vec::new());
        assert!(incoming
            .read_head()
            .await
            .unwrap_err()
            .to_string()
            .contains("KiB"));
        let mut incoming = Incoming::new(&b"GET / HTTP/1.1\r\n\r\nrest"[..], Vec::new());
        assert_eq!(
            incoming.read_head().await.unwrap().unwrap(),
            b"GET / HTTP/1.1\r\n\r\n"
        );
        assert_eq!(incoming.peek(), b"rest");
    }
}
