//! A response body that tells when it is over, and how: read to its end, or dropped
//! before (the client closed the connection). An SSE stream of a call that is dropped
//! unfinished means nobody waits for that call's answer any more: its run is cancelled
//! (the streamable HTTP transport would otherwise let it run on, for a resumption this
//! server does not offer), and the connection learns it may have lost its client.

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use http_body_util::combinators::BoxBody;
use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

/// What to do when the body is over; `true` when it was read to its end.
pub type OnEnd = Box<dyn FnOnce(bool) + Send + Sync>;

pub struct Watched {
    inner: BoxBody<Bytes, Infallible>,
    on_end: Option<OnEnd>,
    completed: bool,
}

impl Watched {
    pub fn new(inner: BoxBody<Bytes, Infallible>, on_end: OnEnd) -> Watched {
        Watched {
            inner,
            on_end: Some(on_end),
            completed: false,
        }
    }
}

impl Body for Watched {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if let Poll::Ready(None) = polled {
            self.completed = true;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for Watched {
    fn drop(&mut self) {
        let completed = self.completed || self.inner.is_end_stream();
        if let Some(on_end) = self.on_end.take() {
            on_end(completed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::{BodyExt, Full};
    use std::sync::{Arc, Mutex};

    fn watched(text: &'static str) -> (Watched, Arc<Mutex<Option<bool>>>) {
        let seen = Arc::new(Mutex::new(None));
        let record = seen.clone();
        let body = Watched::new(
            Full::new(Bytes::from(text)).boxed(),
            Box::new(move |completed| *record.lock().unwrap() = Some(completed)),
        );
        (body, seen)
    }

    #[tokio::test]
    async fn a_body_read_to_its_end_is_completed_and_a_dropped_one_is_not() {
        let (body, seen) = watched("data: x\n\n");
        let bytes = body.collect().await.unwrap().to_bytes();
        assert_eq!(bytes, "data: x\n\n");
        assert_eq!(*seen.lock().unwrap(), Some(true));

        let seen = Arc::new(Mutex::new(None));
        let record = seen.clone();
        let (sender, receiver) = tokio::sync::mpsc::channel::<Result<Frame<Bytes>, Infallible>>(1);
        let stream = http_body_util::StreamBody::new(tokio_stream_of(receiver));
        let body = Watched::new(
            stream.boxed(),
            Box::new(move |completed| *record.lock().unwrap() = Some(completed)),
        );
        drop(body);
        drop(sender);
        assert_eq!(*seen.lock().unwrap(), Some(false));
    }

    fn tokio_stream_of<T: Send + 'static>(
        mut receiver: tokio::sync::mpsc::Receiver<T>,
    ) -> impl futures_util::Stream<Item = T> + Send + Sync + 'static {
        futures_util::stream::poll_fn(move |cx| receiver.poll_recv(cx))
    }
}
