//! W3C trace-context propagation.
//!
//! One change is one trace: the detector starts it, and every gRPC call carries the current
//! span's context in a `traceparent` header. Work that is picked up from a watch instead of a
//! call links to the trace that caused it through the `flotilla.io/traceparent` annotation the
//! writer stored on the object.

use std::collections::HashMap;

use opentelemetry::propagation::{Extractor, Injector};
use opentelemetry::trace::TraceContextExt;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// The W3C header and annotation value name.
pub const TRACEPARENT: &str = "traceparent";

/// Installs the W3C propagator as the global text-map propagator.
pub fn install_propagator() {
    opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
}

/// Writes the current span's context into `carrier` (no-op when tracing is not exported).
pub fn inject_current(carrier: &mut dyn Injector) {
    let context = tracing::Span::current().context();
    opentelemetry::global::get_text_map_propagator(|propagator| propagator.inject_context(&context, carrier));
}

/// Reads a context from `carrier` and makes it the parent of `span`.
pub fn set_parent_from(span: &tracing::Span, carrier: &dyn Extractor) {
    let parent = opentelemetry::global::get_text_map_propagator(|propagator| propagator.extract(carrier));
    if parent.span().span_context().is_valid() {
        let _ = span.set_parent(parent);
    }
}

/// The current span's `traceparent`, if it is part of an exported trace.
pub fn current_traceparent() -> Option<String> {
    let mut carrier = HashMap::new();
    inject_current(&mut carrier);
    carrier.remove(TRACEPARENT)
}

/// Makes the trace identified by `traceparent` the parent of `span`.
pub fn set_parent_from_traceparent(span: &tracing::Span, traceparent: &str) {
    let carrier = HashMap::from([(TRACEPARENT.to_owned(), traceparent.to_owned())]);
    set_parent_from(span, &carrier);
}

/// Adds a link from `span` to the trace identified by `traceparent` (for work picked up from a
/// watch: related to, but not a child of, the change that wrote the object).
pub fn link_to_traceparent(span: &tracing::Span, traceparent: &str) {
    let carrier = HashMap::from([(TRACEPARENT.to_owned(), traceparent.to_owned())]);
    let context = opentelemetry::global::get_text_map_propagator(|propagator| propagator.extract(&carrier));
    let span_context = context.span().span_context().clone();
    if span_context.is_valid() {
        span.add_link(span_context);
    }
}

/// Ties `span` (work picked up from a watch) to the change recorded in `traceparent`: as its
/// parent when `continues_change` (the object's change is still unprocessed by this service,
/// i.e. the watch beat the gRPC call that would have carried the trace), else as a link (a
/// resync or a repair of an already-processed change starts a trace of its own). Call it
/// before the span is first entered.
pub fn follow_traceparent(span: &tracing::Span, traceparent: &str, continues_change: bool) {
    if continues_change {
        set_parent_from_traceparent(span, traceparent);
    } else {
        link_to_traceparent(span, traceparent);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_traceparent_without_an_exported_trace() {
        install_propagator();
        assert_eq!(current_traceparent(), None);
    }

    #[test]
    fn malformed_traceparent_is_ignored() {
        install_propagator();
        let span = tracing::info_span!("test");
        set_parent_from_traceparent(&span, "not-a-traceparent");
        link_to_traceparent(&span, "00-zz-yy-01");
    }
}
