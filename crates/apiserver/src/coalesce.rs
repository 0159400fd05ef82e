//! [`Coalescing`]: a connection's writes held until a flush, and the flush held for one turn of
//! the runtime, so that the answers and watch events that become ready together leave in one
//! TLS record and one `writev`, not one each.
//!
//! Without it every HTTP/2 flush went to the socket at once: a group commit wakes every handler
//! waiting on it, each finished answer made hyper's connection task flush, and the control
//! plane made about one `writev` per answer or watch event (strace of a benchmark run: 7,000
//! `writev` against 800 `recvfrom` in 3 s on execution's connection, 1-3.5 KiB each). Each
//! `writev` costs the sender the TLS record and the loopback TCP send, and the receiver a
//! wake-up, a read and a record to decrypt.
//!
//! The flush is held by [`tokio::task::yield_now`]: the connection task goes to the back of the
//! run queue, the handlers already woken run and queue their frames, and the next flush sends
//! them all. A flush is never held twice in a row, so nothing waits longer than one turn.
//!
//! Only the server's connections are wrapped (ADR 0039): the same on the services' clients,
//! whose one-thread runtimes then held each request behind their own work, cost more CPU than
//! it saved.

use std::future::Future;
use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// How many bytes are held before a write goes through without waiting for a flush: TLS
/// records hold 16 KiB, so this is four full records.
pub const HOLD_LIMIT: usize = 64 * 1024;

/// How much buffer a connection keeps between flushes.
const KEEP: usize = 16 * 1024;

/// Where a flush of held bytes is.
enum Flush {
    /// No flush is under way.
    Idle,
    /// A flush waits for its turn.
    Waiting(Pin<Box<dyn Future<Output = ()> + Send>>),
    /// A flush had its turn and is sending; the socket may take several polls, and a finished
    /// turn is never polled again.
    Sending,
}

/// An I/O stream whose writes are held until a flush, and whose flushes wait one turn of the
/// runtime (see the module docs). Reads pass through.
pub struct Coalescing<T> {
    inner: T,
    held: Vec<u8>,
    /// Bytes of `held` already written to `inner`.
    sent: usize,
    flush: Flush,
}

impl<T> Coalescing<T> {
    /// Wraps `inner`.
    pub fn new(inner: T) -> Self {
        Coalescing {
            inner,
            held: Vec::new(),
            sent: 0,
            flush: Flush::Idle,
        }
    }

    /// The wrapped stream.
    pub fn get_ref(&self) -> &T {
        &self.inner
    }
}

impl<T: AsyncWrite + Unpin> Coalescing<T> {
    /// Writes what is held to `inner`; ready when nothing is.
    fn poll_send_held(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.sent < self.held.len() {
            let n = ready!(Pin::new(&mut self.inner).poll_write(cx, &self.held[self.sent..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.sent += n;
        }
        self.held.clear();
        self.sent = 0;
        // What a burst (a large list) grew is given back: an idle connection keeps at most
        // `KEEP` bytes (most flushes are a few KiB, so a busy connection keeps reusing them).
        if self.held.capacity() > KEEP {
            self.held.shrink_to(KEEP);
        }
        Poll::Ready(Ok(()))
    }

    /// Holds as much of `bytes` as fits under [`HOLD_LIMIT`]; returns how much.
    fn hold(&mut self, bytes: &[u8]) -> usize {
        let n = bytes.len().min(HOLD_LIMIT - self.held.len());
        let needed = self.held.len() + n;
        if needed > self.held.capacity() {
            // Grow as a `Vec` does, but never past the limit.
            let target = needed.max(2 * self.held.capacity()).min(HOLD_LIMIT);
            self.held.reserve_exact(target - self.held.len());
        }
        self.held.extend_from_slice(&bytes[..n]);
        n
    }

    /// Makes room for more held bytes: sends what is held once it reaches [`HOLD_LIMIT`].
    fn poll_room(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.held.len() >= HOLD_LIMIT {
            ready!(self.poll_send_held(cx))?;
        }
        Poll::Ready(Ok(()))
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Coalescing<T> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Coalescing<T> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        ready!(this.poll_room(cx))?;
        Poll::Ready(Ok(this.hold(buf)))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        ready!(this.poll_room(cx))?;
        let mut written = 0;
        for buf in bufs {
            let n = this.hold(buf);
            written += n;
            if n < buf.len() {
                break;
            }
        }
        Poll::Ready(Ok(written))
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !this.held.is_empty() {
            if let Flush::Idle = this.flush {
                this.flush = Flush::Waiting(Box::pin(tokio::task::yield_now()));
            }
            if let Flush::Waiting(turn) = &mut this.flush {
                ready!(turn.as_mut().poll(cx));
                this.flush = Flush::Sending;
            }
            ready!(this.poll_send_held(cx))?;
            this.flush = Flush::Idle;
        }
        Pin::new(&mut this.inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_send_held(cx))?;
        this.flush = Flush::Idle;
        Pin::new(&mut this.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A writer that records every write call it gets.
    #[derive(Default)]
    struct Recorder {
        writes: Vec<Vec<u8>>,
        flushes: usize,
        shut: bool,
    }

    impl AsyncWrite for Recorder {
        fn poll_write(mut self: Pin<&mut Self>, _: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
            // At most 10 KiB per call, like a socket with a full buffer would take.
            let n = buf.len().min(10 * 1024);
            self.writes.push(buf[..n].to_vec());
            Poll::Ready(Ok(n))
        }
        fn poll_flush(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            self.flushes += 1;
            Poll::Ready(Ok(()))
        }
        fn poll_shutdown(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            self.shut = true;
            Poll::Ready(Ok(()))
        }
    }

    #[tokio::test]
    async fn writes_wait_for_the_flush_and_leave_together() {
        let mut io = Coalescing::new(Recorder::default());
        io.write_all(b"first answer;").await.unwrap();
        io.write_all(b"second answer;").await.unwrap();
        assert!(
            io.get_ref().writes.is_empty(),
            "nothing is written before a flush"
        );
        io.flush().await.unwrap();
        assert_eq!(io.get_ref().writes, vec![b"first answer;second answer;".to_vec()]);
        assert_eq!(io.get_ref().flushes, 1);
        // Nothing held: a flush goes straight through.
        io.flush().await.unwrap();
        assert_eq!((io.get_ref().writes.len(), io.get_ref().flushes), (1, 2));
    }

    #[tokio::test]
    async fn a_flush_waits_one_turn_and_takes_what_was_written_meanwhile() {
        let mut io = Coalescing::new(Recorder::default());
        io.write_all(b"A").await.unwrap();
        // The first poll of a flush gives the turn away, as hyper's connection task sees it.
        let mut cx = Context::from_waker(std::task::Waker::noop());
        assert!(Pin::new(&mut io).poll_flush(&mut cx).is_pending());
        assert!(io.get_ref().writes.is_empty());
        // In that turn another answer is queued; the flush then sends both in one write.
        io.write_all(b"B").await.unwrap();
        io.flush().await.unwrap();
        assert_eq!(io.get_ref().writes, vec![b"AB".to_vec()]);
        assert_eq!(io.get_ref().flushes, 1);
    }

    /// A writer that takes at most `per_call` bytes per call and answers every other call
    /// `Pending` (a socket whose buffer is full until it is woken).
    struct Slow {
        written: Vec<u8>,
        per_call: usize,
        refuse: bool,
    }

    impl AsyncWrite for Slow {
        fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
            self.refuse = !self.refuse;
            if self.refuse {
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            let n = buf.len().min(self.per_call);
            self.written.extend_from_slice(&buf[..n]);
            Poll::Ready(Ok(n))
        }
        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
        fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    #[tokio::test]
    async fn a_socket_that_is_full_at_times_gets_everything_in_order() {
        let mut io = Coalescing::new(Slow {
            written: Vec::new(),
            per_call: 1000,
            refuse: false,
        });
        let mut expected = Vec::new();
        // Flushes that take several polls to send, writes between them, and writes past the
        // hold limit: a flush whose turn is over goes on sending on its next poll.
        for round in 0..20u32 {
            let chunk: Vec<u8> = (0..(round * 7_919 % 90_000 + 1))
                .map(|i| (i % 253) as u8)
                .collect();
            io.write_all(&chunk).await.unwrap();
            expected.extend_from_slice(&chunk);
            if round % 3 != 2 {
                io.flush().await.unwrap();
                assert_eq!(io.get_ref().written, expected, "round {round}");
            }
        }
        io.shutdown().await.unwrap();
        assert_eq!(io.get_ref().written, expected);
    }

    #[tokio::test]
    async fn large_writes_go_through_before_the_flush_and_in_order() {
        let mut io = Coalescing::new(Recorder::default());
        let body: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        io.write_all(&body).await.unwrap();
        assert!(
            !io.get_ref().writes.is_empty(),
            "more than the hold limit is written without a flush"
        );
        io.flush().await.unwrap();
        let written: Vec<u8> = io.get_ref().writes.concat();
        assert_eq!(written, body);
        assert!(io.held.capacity() <= KEEP, "the burst's buffer is given back");
    }

    #[tokio::test]
    async fn shutdown_sends_what_is_held() {
        let mut io = Coalescing::new(Recorder::default());
        io.write_all(b"last words").await.unwrap();
        io.shutdown().await.unwrap();
        assert_eq!(io.get_ref().writes, vec![b"last words".to_vec()]);
        assert!(io.get_ref().shut);
    }

    #[tokio::test]
    async fn reads_pass_through() {
        let (client, server) = tokio::io::duplex(64);
        let mut io = Coalescing::new(server);
        let mut client = client;
        client.write_all(b"request").await.unwrap();
        let mut got = [0u8; 7];
        io.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"request");
        io.write_all(b"answer").await.unwrap();
        io.flush().await.unwrap();
        let mut got = [0u8; 6];
        client.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"answer");
    }
}
