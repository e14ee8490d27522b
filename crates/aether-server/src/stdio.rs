//! This process's stdin and stdout as the stdio session reads and writes them.
//!
//! tokio's `stdin()` and `stdout()` hand every read and write to the blocking pool: two thread
//! hand-offs (and their wake-ups) per message. An MCP client starts Aether with a pipe (most
//! SDKs) or a Unix socket (Node's `child_process`) on each, and both can be read and written by
//! the runtime itself, woken by epoll. Anything else (a terminal, a file) keeps tokio's.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::FileTypeExt;

use tokio::io::{AsyncRead, AsyncWrite};

pub(crate) type Input = Box<dyn AsyncRead + Unpin + Send>;
pub(crate) type Output = Box<dyn AsyncWrite + Unpin + Send>;

/// stdin and stdout, each read or written without the blocking pool where it can be. Must be
/// called within the runtime.
pub(crate) fn streams() -> (Input, Output) {
    // The streams own (and close) copies of 0 and 1, which stay open: a file opened later
    // never becomes "stdout".
    let input: Input = match own(std::io::stdin().as_fd()).and_then(reader) {
        Some(Ok(r)) => r,
        _ => Box::new(tokio::io::stdin()),
    };
    let output: Output = match own(std::io::stdout().as_fd()).and_then(writer) {
        Some(Ok(w)) => w,
        _ => Box::new(tokio::io::stdout()),
    };
    (input, output)
}

/// What an open descriptor is, as far as choosing how to read it goes.
enum Kind {
    Pipe,
    UnixSocket,
    Other,
}

fn own(fd: BorrowedFd<'_>) -> Option<OwnedFd> {
    fd.try_clone_to_owned().ok()
}

fn kind(fd: &OwnedFd) -> Kind {
    let Ok(file) = fd.try_clone().map(std::fs::File::from) else {
        return Kind::Other;
    };
    let Ok(meta) = file.metadata() else {
        return Kind::Other;
    };
    let t = meta.file_type();
    if t.is_fifo() {
        Kind::Pipe
    } else if t.is_socket()
        // A socket of another family (TCP, say) is not a Unix stream: leave it to tokio's.
        && fd
            .try_clone()
            .map(std::os::unix::net::UnixStream::from)
            .is_ok_and(|s| s.local_addr().is_ok())
    {
        Kind::UnixSocket
    } else {
        Kind::Other
    }
}

/// `None` when `fd` is neither a pipe nor a Unix socket.
fn reader(fd: OwnedFd) -> Option<std::io::Result<Input>> {
    Some(match kind(&fd) {
        Kind::Pipe => {
            tokio::net::unix::pipe::Receiver::from_owned_fd(fd).map(|r| Box::new(r) as Input)
        }
        Kind::UnixSocket => unix_stream(fd).map(|s| Box::new(s) as Input),
        Kind::Other => return None,
    })
}

fn writer(fd: OwnedFd) -> Option<std::io::Result<Output>> {
    Some(match kind(&fd) {
        Kind::Pipe => {
            tokio::net::unix::pipe::Sender::from_owned_fd(fd).map(|w| Box::new(w) as Output)
        }
        Kind::UnixSocket => unix_stream(fd).map(|s| Box::new(s) as Output),
        Kind::Other => return None,
    })
}

fn unix_stream(fd: OwnedFd) -> std::io::Result<tokio::net::UnixStream> {
    let stream = std::os::unix::net::UnixStream::from(fd);
    stream.set_nonblocking(true)?;
    tokio::net::UnixStream::from_std(stream)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn a_pipe_and_a_unix_socket_are_read_and_written_by_the_runtime() {
        // A pipe: the read end is a reader, the write end a writer.
        let (rx, tx) = std::io::pipe().unwrap();
        assert!(matches!(
            kind(&OwnedFd::from(rx.try_clone().unwrap())),
            Kind::Pipe
        ));
        let mut w = writer(OwnedFd::from(tx)).unwrap().unwrap();
        let mut r = reader(OwnedFd::from(rx)).unwrap().unwrap();
        w.write_all(b"over a pipe\n").await.unwrap();
        drop(w);
        let mut got = String::new();
        r.read_to_string(&mut got).await.unwrap();
        assert_eq!(got, "over a pipe\n");

        // A socket pair, as Node gives a child.
        let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        assert!(matches!(
            kind(&OwnedFd::from(a.try_clone().unwrap())),
            Kind::UnixSocket
        ));
        let mut w = writer(OwnedFd::from(a)).unwrap().unwrap();
        let mut r = reader(OwnedFd::from(b)).unwrap().unwrap();
        w.write_all(b"over a socket\n").await.unwrap();
        drop(w);
        let mut got = String::new();
        r.read_to_string(&mut got).await.unwrap();
        assert_eq!(got, "over a socket\n");
    }

    #[tokio::test]
    async fn a_file_or_a_tcp_socket_is_left_to_tokios_blocking_stdio() {
        let file = tempfile::tempfile().unwrap();
        assert!(matches!(kind(&OwnedFd::from(file)), Kind::Other));
        assert!(reader(OwnedFd::from(tempfile::tempfile().unwrap())).is_none());
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let tcp = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        assert!(matches!(kind(&OwnedFd::from(tcp)), Kind::Other));
    }
}
