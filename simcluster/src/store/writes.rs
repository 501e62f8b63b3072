//! The registry's write rules under the store's lock: create, update, delete with
//! preconditions and propagation (the GC finalizers), emptying finalizers of an object being
//! deleted, CRDs; each write versioned, recorded in the history and audited.

use super::*;

/// A delete, as [`Store::audit_delete`] saw it before it was applied.
pub(super) struct AuditedDelete {
    pub(super) actor: Arc<str>,
    pub(super) before: Value,
    /// The owners' states, for a delete the collector makes (the oracle judges it).
    pub(super) owners: Option<Vec<(OwnerRef, OwnerState)>>,
    /// The propagationPolicy sent, if any.
    pub(super) policy: Option<&'static str>,
}

impl State {
    /// The state of `owner`, referenced by an object in `namespace`, where a collector looks
    /// for it (GC-SPEC §3.3): by group and kind (any served version), in the dependent's
    /// namespace for a namespaced kind, cluster-wide for a cluster-scoped one.
    pub(super) fn owner_state(&self, namespace: Option<&str>, owner: &OwnerRef) -> OwnerState {
        let group = owner.group();
        let Some(def) = self.registry.all().find(|d| d.group == group && d.kind == owner.kind)
        else {
            return OwnerState::Absent;
        };
        let Some((_, table)) = self.registry.lookup(&def.group, &def.version, &def.plural) else {
            return OwnerState::Absent;
        };
        let ns = match (def.namespaced, namespace) {
            (true, Some(ns)) => Some(ns),
            // A namespaced owner of a cluster-scoped object: never looked up, the object never
            // deleted (GC-SPEC §3.3 step 5).
            (true, None) => return OwnerState::NamespacedOwnerOfClusterScoped,
            (false, _) => None,
        };
        let found = self
            .tables
            .get(table)
            .and_then(Option::as_ref)
            .and_then(|t| t.get(&object_key(ns, &owner.name)))
            .and_then(|bytes| parse_stored(bytes).ok());
        OwnerState::of(found.as_ref(), &owner.uid)
    }

    pub(super) fn add_resource(&mut self, def: ResourceDef) {
        let table = self.registry.add(def);
        if self.tables.len() < self.registry.table_count() {
            self.tables.resize_with(self.registry.table_count(), || None);
        }
        if self.tables[table].is_none() {
            self.tables[table] = Some(BTreeMap::new());
        }
    }

    pub(super) fn table(&self, r: &Resolved) -> Result<&BTreeMap<Box<str>, Arc<StoredObject>>> {
        self.tables.get(r.table).and_then(Option::as_ref).ok_or_else(|| gone_resource(r))
    }

    pub(super) fn table_mut(
        &mut self,
        r: &Resolved,
    ) -> Result<&mut BTreeMap<Box<str>, Arc<StoredObject>>> {
        self.tables.get_mut(r.table).and_then(Option::as_mut).ok_or_else(|| gone_resource(r))
    }

    pub(super) fn current(&self, r: &Resolved, key: &str, name: &str) -> Result<Value> {
        let bytes = self.table(r)?.get(key).ok_or_else(|| not_found(r, name))?;
        parse_stored(bytes)
    }

    /// Writes `obj` at the next resourceVersion, records and broadcasts the change. Returns the
    /// object as stored, with `apiVersion` and `kind`.
    pub(super) fn write_object(
        &mut self,
        r: &Resolved,
        namespace: Option<&str>,
        key: Box<str>,
        mut obj: Value,
        kind: ChangeKind,
        tx: &broadcast::Sender<Arc<Change>>,
    ) -> Value {
        self.rv += 1;
        let rv = self.rv;
        if let Some(o) = obj.as_object_mut() {
            o.remove("apiVersion");
            o.remove("kind");
        }
        if let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
            m.insert("resourceVersion".into(), rv.to_string().into());
        }
        let bytes =
            Arc::new(StoredObject::new(serde_json::to_vec(&obj).expect("a Value serializes")));
        let table = self.table_mut(r).expect("checked by the caller");
        if kind == ChangeKind::Deleted {
            table.remove(&key);
        } else {
            table.insert(key, bytes.clone());
        }
        let change = Arc::new(Change {
            rv,
            table: r.table,
            namespace: namespace.unwrap_or_default().into(),
            kind,
            object: bytes,
        });
        self.history.push_back(change.clone());
        while self.history.len() > self.history_limit {
            let old = self.history.pop_front().expect("non-empty");
            self.floor = old.rv;
        }
        // No receiver is not an error: nobody watches.
        let _ = tx.send(change);
        with_type(&r.def, obj)
    }

    #[allow(clippy::too_many_arguments)] // one private write path; the arguments are its inputs
    pub(super) fn update_object(
        &mut self,
        r: &Resolved,
        namespace: Option<&str>,
        key: Box<str>,
        current: &Value,
        mut next: Value,
        is_patch: bool,
        tx: &broadcast::Sender<Arc<Change>>,
    ) -> Result<(Value, ChangeKind)> {
        let name = current["metadata"]["name"].as_str().unwrap_or_default().to_owned();
        let cur_meta = current["metadata"].as_object().cloned().unwrap_or_default();
        let meta = metadata_mut(&mut next)?;
        // Identity: name and namespace come from the URL.
        let sent_name = meta.get("name").and_then(Value::as_str).unwrap_or_default();
        if !sent_name.is_empty() && sent_name != name {
            let msg = format!(
                "the name of the object ({sent_name}) does not match the name on the URL ({name})"
            );
            return Err(if is_patch { Error::Invalid(msg) } else { Error::BadRequest(msg) });
        }
        let sent_ns = meta.get("namespace").and_then(Value::as_str).unwrap_or_default();
        if !sent_ns.is_empty() && Some(sent_ns) != namespace {
            return Err(Error::BadRequest(
                "the namespace of the provided object does not match the namespace sent on the request".into(),
            ));
        }
        // Optimistic concurrency, then immutability (the store's GuaranteedUpdate order).
        let current_rv =
            cur_meta.get("resourceVersion").and_then(Value::as_str).unwrap_or_default();
        let sent_rv = meta.get("resourceVersion").and_then(Value::as_str).unwrap_or_default();
        if !sent_rv.is_empty() && sent_rv != current_rv {
            return Err(conflict(
                r,
                &name,
                "the object has been modified; please apply your changes to the latest version and try again".into(),
            ));
        }
        let uid = cur_meta.get("uid").and_then(Value::as_str).unwrap_or_default();
        let sent_uid = meta.get("uid").and_then(Value::as_str).unwrap_or_default();
        if !sent_uid.is_empty() && sent_uid != uid {
            return Err(Error::Invalid(format!(
                "metadata.uid: Invalid value: {sent_uid:?}: field is immutable"
            )));
        }
        // System fields are the server's.
        for field in [
            "name",
            "namespace",
            "uid",
            "resourceVersion",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
        ] {
            match cur_meta.get(field) {
                Some(v) => meta.insert(field.into(), v.clone()),
                None => meta.remove(field),
            };
        }
        validate_owner_references(meta)?;
        let finalizers = string_list(meta.get("finalizers"))?;
        let deleting = cur_meta.get("deletionTimestamp").is_some_and(|v| !v.is_null());
        if deleting {
            let old = string_list(cur_meta.get("finalizers"))?;
            if let Some(added) = finalizers.iter().find(|f| !old.contains(f)) {
                return Err(Error::Invalid(format!(
                    "metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers [{added:?}]"
                )));
            }
        }
        if let Some(o) = next.as_object_mut() {
            o.remove("apiVersion");
            o.remove("kind");
        }
        // ShouldDeleteDuringUpdate: an update that empties the finalizers of an object being
        // deleted (grace period 0 here, always) removes it.
        if deleting && finalizers.is_empty() {
            let out = self.write_object(r, namespace, key, next, ChangeKind::Deleted, tx);
            return Ok((out, ChangeKind::Deleted));
        }
        if &next == current {
            return Ok((with_type(&r.def, next), ChangeKind::Modified)); // no-op: no new version
        }
        let out = self.write_object(r, namespace, key, next, ChangeKind::Modified, tx);
        Ok((out, ChangeKind::Modified))
    }

    #[allow(clippy::too_many_arguments)] // one private write path; the arguments are its inputs
    pub(super) fn delete_object(
        &mut self,
        r: &Resolved,
        namespace: Option<&str>,
        key: Box<str>,
        mut current: Value,
        policy: Option<PropagationPolicy>,
        preconditions: Option<&Preconditions>,
        tx: &broadcast::Sender<Arc<Change>>,
    ) -> Result<(Value, bool)> {
        let name = current["metadata"]["name"].as_str().unwrap_or_default().to_owned();
        let text =
            |v: &Value, field: &str| v["metadata"][field].as_str().unwrap_or_default().to_owned();
        if let Some(p) = preconditions {
            let uid = text(&current, "uid");
            if let Some(want) = p.uid.as_deref().filter(|u| *u != uid) {
                return Err(conflict(
                    r,
                    &name,
                    format!(
                        "Precondition failed: UID in precondition: {want}, UID in object meta: {uid}"
                    ),
                ));
            }
            let rv = text(&current, "resourceVersion");
            if let Some(want) = p.resource_version.as_deref().filter(|v| *v != rv) {
                return Err(conflict(
                    r,
                    &name,
                    format!(
                        "Precondition failed: ResourceVersion in precondition: {want}, ResourceVersion in object meta: {rv}"
                    ),
                ));
            }
        }
        let finalizers = string_list(current["metadata"].get("finalizers"))?;
        let next_finalizers =
            deletion_finalizers_for_garbage_collection(&finalizers, policy, r.def.default_orphan);
        let finalizers = next_finalizers.clone().unwrap_or(finalizers);
        if finalizers.is_empty() {
            let out = self.write_object(r, namespace, key, current, ChangeKind::Deleted, tx);
            if resources::is_crd_resource(&r.def) {
                self.remove_crd(&out);
            }
            return Ok((out, true));
        }
        // Keep the object, being deleted, until its finalizers are gone (markAsDeleting).
        let before = current.clone();
        let meta = metadata_mut(&mut current)?;
        meta.insert("finalizers".into(), finalizers.into_iter().map(Value::String).collect());
        if meta.get("deletionTimestamp").is_none_or(Value::is_null) {
            meta.insert("deletionTimestamp".into(), now_rfc3339().into());
            let generation = meta.get("generation").and_then(Value::as_i64).unwrap_or(0);
            meta.insert("generation".into(), (generation + 1).into());
        }
        meta.insert("deletionGracePeriodSeconds".into(), 0.into());
        if current == before {
            return Ok((with_type(&r.def, current), false));
        }
        let out = self.write_object(r, namespace, key, current, ChangeKind::Modified, tx);
        Ok((out, false))
    }

    pub(super) fn remove_crd(&mut self, crd: &Value) {
        let group = crd.pointer("/spec/group").and_then(Value::as_str).unwrap_or_default();
        let plural = crd.pointer("/spec/names/plural").and_then(Value::as_str).unwrap_or_default();
        if let Some(table) = self.registry.remove(group, plural) {
            self.tables[table] = None;
        }
    }
}

pub(super) fn crd_status(crd: &Value) -> Value {
    let names = crd.pointer("/spec/names").cloned().unwrap_or(Value::Null);
    let now = now_rfc3339();
    serde_json::json!({
        "acceptedNames": names,
        "conditions": [
            {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
             "message": "no conflicts found", "lastTransitionTime": now},
            {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
             "message": "the initial names have been accepted", "lastTransitionTime": now},
        ],
        "storedVersions": crd.pointer("/spec/versions").and_then(Value::as_array)
            .map(|vs| vs.iter().filter(|v| v["storage"] == true).map(|v| v["name"].clone()).collect::<Vec<_>>())
            .unwrap_or_default(),
    })
}
