//! The `Table` representation (`Accept: application/json;as=Table;v=v1;g=meta.k8s.io`), which
//! `kubectl get` asks for to print its default columns.
//!
//! Every resource is converted by the apiserver's `DefaultTableConvertor`
//! (k8s.io/apiserver/pkg/registry/rest/table.go, what a resource without a printer gets):
//! columns `Name` and `Created At`, one row per object, and the row's object as the request's
//! `includeObject` says (`Metadata`, the default: a `PartialObjectMetadata`; `Object`: the
//! whole object; `None`: no object).
//!
//! Divergence from the real server: builtin resources have no specific columns (the real
//! server's pods show READY / STATUS / RESTARTS, …), and watches answer objects rather than
//! one-row Tables (kubectl prints those with its own default `NAME AGE` columns).

use serde_json::{Value, json};

/// The `Accept` parameter that asks for a Table.
const TABLE: &str = "as=Table";

/// Whether `accept` asks for a Table first (before any other representation it lists).
pub(crate) fn wanted(accept: &str) -> bool {
    accept.split(',').next().is_some_and(|first| first.contains(TABLE))
}

/// What each row carries (`includeObject`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Include {
    None,
    Metadata,
    Object,
}

impl Include {
    /// From the `includeObject` query parameter (default `Metadata`).
    pub(crate) fn from_query(value: Option<&str>) -> Include {
        match value {
            Some("None") => Include::None,
            Some("Object") => Include::Object,
            _ => Include::Metadata,
        }
    }
}

/// A Table of `objects` (whole objects, with `apiVersion` and `kind`); `list_meta` is the
/// list's `metadata` (`resourceVersion`, `continue`).
pub(crate) fn render(objects: &[Value], list_meta: Value, include: Include) -> Value {
    let rows: Vec<Value> = objects
        .iter()
        .map(|o| {
            let meta = o.get("metadata").cloned().unwrap_or_else(|| json!({}));
            let cells = json!([
                meta.get("name").cloned().unwrap_or_default(),
                meta.get("creationTimestamp").cloned().unwrap_or_default(),
            ]);
            match include {
                Include::None => json!({"cells": cells}),
                Include::Object => json!({"cells": cells, "object": o}),
                Include::Metadata => json!({"cells": cells, "object": {
                    "kind": "PartialObjectMetadata",
                    "apiVersion": "meta.k8s.io/v1",
                    "metadata": meta,
                }}),
            }
        })
        .collect();
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": list_meta,
        "columnDefinitions": [
            {"name": "Name", "type": "string", "format": "name", "priority": 0,
             "description": "Name must be unique within a namespace."},
            {"name": "Created At", "type": "date", "format": "", "priority": 0,
             "description": "CreationTimestamp is a timestamp representing the server time when this object was created."},
        ],
        "rows": rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_should_be_wanted_only_when_asked_first() {
        let kubectl = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
        assert!(wanted(kubectl));
        assert!(!wanted("application/json"));
        assert!(!wanted("application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"));
    }

    #[test]
    fn rows_should_carry_name_creation_and_the_object_asked_for() {
        let obj = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a", "creationTimestamp": "2024-05-01T12:00:00Z"}});
        let t =
            render(std::slice::from_ref(&obj), json!({"resourceVersion": "7"}), Include::Metadata);
        assert_eq!(t["rows"][0]["cells"], json!(["a", "2024-05-01T12:00:00Z"]));
        assert_eq!(t["rows"][0]["object"]["kind"], "PartialObjectMetadata");
        assert_eq!(t["metadata"]["resourceVersion"], "7");
        let t = render(std::slice::from_ref(&obj), json!({}), Include::None);
        assert!(t["rows"][0].get("object").is_none());
        let t = render(std::slice::from_ref(&obj), json!({}), Include::Object);
        assert_eq!(t["rows"][0]["object"], obj);
    }
}
