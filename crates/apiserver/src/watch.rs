//! WATCH: initial state (when asked for), then every change after a resourceVersion exactly
//! once and in order, filtered by selectors (an object that stops matching is DELETED, one
//! that starts matching is ADDED), bookmarks, timeouts, and 410 Expired for compacted revisions.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use flotilla_store::{EventKind, KeyValue, WatchError};
use http::Response;
use serde_json::json;
use tokio::sync::mpsc;

use crate::errors::{ApiError, ApiResult};
use crate::http::{Body, stream_response};
use crate::ops::{Api, parse_rv};
use crate::resources::ResourceDef;
use crate::selectors::{FieldSelector, LabelSelector, supported_fields};
use crate::table::IncludeObject;

/// How often a bookmark is sent while the watcher's revision moves without matching events.
const BOOKMARK_INTERVAL: Duration = Duration::from_secs(5);

struct Filter {
    labels: LabelSelector,
    fields: FieldSelector,
}

impl Filter {
    /// Whether a stored object is selected (selectors on metadata read only its metadata).
    fn matches(&self, api: &Api, def: &ResourceDef, kv: &KeyValue) -> bool {
        api.selects(def, kv, &self.labels, &self.fields)
    }
}

enum Mode {
    Object,
    Table {
        include: IncludeObject,
        headers_sent: bool,
    },
    Partial,
}

struct Encoder {
    api: Arc<Api>,
    def: Arc<ResourceDef>,
    mode: Mode,
}

impl Encoder {
    /// One event: the stored object `kv` served at resourceVersion `rv`, rendered from its
    /// stored bytes (decoded only for a table).
    fn event(&mut self, ty: &str, kv: &KeyValue, rv: u64) -> Bytes {
        let mut out = Vec::with_capacity(kv.value.len() + 64);
        out.extend_from_slice(b"{\"type\":\"");
        out.extend_from_slice(ty.as_bytes());
        out.extend_from_slice(b"\",\"object\":");
        match &mut self.mode {
            Mode::Object => self.api.render_into(&self.def, &kv.value, rv, &mut out),
            Mode::Partial => self.api.render_partial_into(&self.def, &kv.value, rv, &mut out),
            Mode::Table {
                include,
                headers_sent,
            } => {
                let obj = self.api.to_value(&self.def, &kv.value, rv);
                let table =
                    crate::table::table(&self.def, &[obj], *include, !*headers_sent, &rv.to_string(), None);
                *headers_sent = true;
                let _ = serde_json::to_writer(&mut out, &table);
            }
        }
        out.extend_from_slice(b"}\n");
        Bytes::from(out)
    }

    fn bookmark(&self, rv: u64, initial_end: bool) -> Bytes {
        let mut meta = json!({"resourceVersion": rv.to_string(), "creationTimestamp": null});
        if initial_end {
            meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        let obj = json!({"kind": self.def.kind, "apiVersion": self.def.api_version(), "metadata": meta});
        let mut out = serde_json::to_vec(&json!({"type": "BOOKMARK", "object": obj})).unwrap_or_default();
        out.push(b'\n');
        Bytes::from(out)
    }
}

fn error_event(e: &ApiError) -> Bytes {
    let mut out = serde_json::to_vec(&json!({"type": "ERROR", "object": e.to_status()})).unwrap_or_default();
    out.push(b'\n');
    Bytes::from(out)
}

fn flag(q: &HashMap<String, String>, name: &str) -> Option<bool> {
    q.get(name).map(|v| v == "true" || v == "1")
}

/// Starts a watch and returns the streaming response.
pub async fn serve(
    api: Arc<Api>,
    def: Arc<ResourceDef>,
    ns: Option<String>,
    q: &HashMap<String, String>,
    table: bool,
    partial: bool,
) -> ApiResult<Response<Body>> {
    let labels = LabelSelector::parse(q.get("labelSelector").map_or("", String::as_str)).map_err(|e| {
        ApiError::bad_request(format!(
            "unable to parse requirement: {}",
            e.trim_start_matches("unable to parse requirement: ")
        ))
    })?;
    let fields = FieldSelector::parse(
        q.get("fieldSelector").map_or("", String::as_str),
        &supported_fields(&def.kind),
    )
    .map_err(ApiError::bad_request)?;
    let filter = Filter { labels, fields };
    let bookmarks = flag(q, "allowWatchBookmarks").unwrap_or(false);
    let send_initial = flag(q, "sendInitialEvents");
    let rv_param = q.get("resourceVersion").cloned().unwrap_or_default();
    let rv_match = q.get("resourceVersionMatch").cloned().unwrap_or_default();
    if send_initial.is_some() {
        if rv_match != "NotOlderThan" {
            return Err(ApiError::invalid(
                "meta.k8s.io",
                "ListOptions",
                "",
                vec![crate::errors::Cause::forbidden(
                    "resourceVersionMatch",
                    "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
                )],
            ));
        }
        if send_initial == Some(true) && !bookmarks {
            return Err(ApiError::invalid(
                "meta.k8s.io",
                "ListOptions",
                "",
                vec![crate::errors::Cause::forbidden(
                    "allowWatchBookmarks",
                    "sendInitialEvents requires setting allowWatchBookmarks to true",
                )],
            ));
        }
    } else if !rv_match.is_empty() {
        return Err(ApiError::invalid(
            "meta.k8s.io",
            "ListOptions",
            "",
            vec![crate::errors::Cause::forbidden(
                "resourceVersionMatch",
                "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
            )],
        ));
    }
    let timeout = match q.get("timeoutSeconds").filter(|t| !t.is_empty()) {
        Some(t) => Duration::from_secs(t.parse::<u64>().map_err(|_| {
            ApiError::bad_request(format!(
                "timeoutSeconds must be a non-negative integer, got {t:?}"
            ))
        })?),
        None => crate::http::default_watch_timeout(),
    };
    let include =
        IncludeObject::parse(q.get("includeObject").map(String::as_str)).map_err(ApiError::bad_request)?;
    let mode = if table {
        Mode::Table {
            include,
            headers_sent: false,
        }
    } else if partial {
        Mode::Partial
    } else {
        Mode::Object
    };
    let prefix = def.list_prefix(ns.as_deref());
    let (tx, rx) = mpsc::channel::<Bytes>(256);
    let mut encoder = Encoder {
        api: api.clone(),
        def: def.clone(),
        mode,
    };

    // Where the stream starts: the current state (initial events) or after a given revision.
    let initial = match (send_initial, rv_param.as_str()) {
        (Some(true), _) => true,
        (Some(false), _) => false,
        (None, "" | "0") => true,
        (None, _) => false,
    };
    let (start, snapshot) = if initial || rv_param.is_empty() || rv_param == "0" {
        let snap = api.store.snapshot();
        if !rv_param.is_empty() && rv_param != "0" {
            let want = parse_rv(&rv_param)?;
            if want > snap.revision() {
                return Err(ApiError::timeout(format!(
                    "Too large resource version: {want}, current: {}",
                    snap.revision()
                )));
            }
        }
        (snap.revision(), if initial { Some(snap) } else { None })
    } else {
        (parse_rv(&rv_param)?, None)
    };
    let watcher = api.store.watch(prefix.clone(), start);

    tokio::spawn(async move {
        let deadline = tokio::time::Instant::now() + timeout;
        let mut watcher = match watcher {
            Ok(w) => w,
            Err(WatchError::Compacted { requested, compacted }) => {
                let _ = tx
                    .send(error_event(&ApiError::expired(format!(
                        "too old resource version: {requested} ({compacted})"
                    ))))
                    .await;
                return;
            }
            Err(WatchError::Closed) => return,
        };
        if let Some(snap) = snapshot {
            for kv in snap.range(&prefix, None) {
                if !filter.matches(&api, &def, kv) {
                    continue;
                }
                if tx
                    .send(encoder.event("ADDED", kv, kv.mod_revision))
                    .await
                    .is_err()
                {
                    return;
                }
            }
            if send_initial == Some(true)
                && bookmarks
                && tx.send(encoder.bookmark(start, true)).await.is_err()
            {
                return;
            }
        }
        let mut last_bookmark = start;
        let mut position = start;
        loop {
            let next = tokio::time::timeout_at(
                deadline.min(tokio::time::Instant::now() + BOOKMARK_INTERVAL),
                watcher.next_batch(),
            );
            match next.await {
                Err(_) => {
                    if tokio::time::Instant::now() >= deadline {
                        if bookmarks && position > last_bookmark {
                            let _ = tx.send(encoder.bookmark(position, false)).await;
                        }
                        return;
                    }
                    if bookmarks && position > last_bookmark {
                        if tx.send(encoder.bookmark(position, false)).await.is_err() {
                            return;
                        }
                        last_bookmark = position;
                    }
                    if tx.is_closed() {
                        return;
                    }
                }
                Ok(Err(WatchError::Compacted { requested, compacted })) => {
                    let _ = tx
                        .send(error_event(&ApiError::expired(format!(
                            "too old resource version: {requested} ({compacted})"
                        ))))
                        .await;
                    return;
                }
                Ok(Err(WatchError::Closed)) => return,
                Ok(Ok(batch)) => {
                    for event in batch.events {
                        if let Some(frame) = translate(&api, &def, &filter, &mut encoder, &event)
                            && tx.send(frame).await.is_err()
                        {
                            return;
                        }
                    }
                    position = batch.revision;
                }
            }
        }
    });
    Ok(stream_response(rx))
}

/// The frame a store event becomes on this watch, if any.
fn translate(
    api: &Api,
    def: &ResourceDef,
    filter: &Filter,
    encoder: &mut Encoder,
    event: &flotilla_store::Event,
) -> Option<Bytes> {
    let rev = event.revision;
    match event.kind {
        EventKind::Put => {
            let new = event.value.as_ref()?;
            let new_match = filter.matches(api, def, new);
            let old_match = event.prev.as_ref().is_some_and(|p| filter.matches(api, def, p));
            let ty = match (old_match, new_match) {
                (true, true) => "MODIFIED",
                (false, true) => "ADDED",
                // Left the selection: kube-apiserver reports the new state as DELETED.
                (true, false) => "DELETED",
                (false, false) => return None,
            };
            Some(encoder.event(ty, new, rev))
        }
        EventKind::Delete => {
            let prev = event.prev.as_ref()?;
            filter
                .matches(api, def, prev)
                .then(|| encoder.event("DELETED", prev, rev))
        }
    }
}
