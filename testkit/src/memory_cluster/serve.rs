//! The API server's side of each call the collector makes: the [`Cluster`] implementation,
//! and how a GET, a list page, a PATCH and a DELETE are served against the state (the
//! registry's deletion rules, preconditions, patch appliers), after the call is recorded and
//! its faults consulted. The module docs of [`super`] give the semantics.

use kube_gc_engine::cluster::{
    Cluster, ClusterError, DeleteOptions, ListPage, ListedObject, Patch, PatchType, Resource,
    WarningEvent,
};
use kube_gc_engine::identity::ObjectType;
use kube_gc_engine::meta::ObjectMeta;

use super::state::{ObjectKey, gvr};
use super::{Call, MemoryCluster, Request, deletion_finalizers_for_garbage_collection};
use crate::patch::apply_patch;

impl MemoryCluster {
    /// Records `call`, then consults pending faults and hooks.
    fn begin(&self, call: Call) -> Result<(), ClusterError> {
        let fault = {
            let mut state = self.state.lock();
            let fault = state.take_fault(&call);
            state.calls.push(call.clone());
            fault
        };
        if let Some(error) = fault {
            return Err(error);
        }
        // Called outside the lock: a hook may make calls of its own.
        let hooks = self.hooks.lock().clone();
        match hooks.iter().find_map(|hook| hook(self, &call)) {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }

    fn serve_get(
        &self,
        resource: &Resource,
        namespace: &str,
        name: &str,
    ) -> Result<ObjectMeta, ClusterError> {
        self.begin(Call {
            resource: resource.clone(),
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            request: Request::Get,
        })?;
        self.object(resource, namespace, name).ok_or(ClusterError::NotFound)
    }

    /// One page of a LIST: the first page takes a snapshot of the resource's objects (in key
    /// order, as etcd's), later pages read on in it, whatever changed since.
    fn serve_list(
        &self,
        resource: &Resource,
        continue_token: Option<&str>,
        limit: u32,
    ) -> Result<ListPage, ClusterError> {
        self.begin(Call {
            resource: resource.clone(),
            namespace: String::new(),
            name: String::new(),
            request: Request::List { continue_token: continue_token.map(str::to_owned), limit },
        })?;
        let mut state = self.state.lock();
        let expired =
            || ClusterError::Other { code: 410, message: "the continue token has expired".into() };
        let (snapshot, offset) = match continue_token {
            None => {
                let wanted = gvr(resource);
                let objects: Vec<ListedObject> = state
                    .objects
                    .iter()
                    .filter(|(k, _)| k.gvr == wanted)
                    .map(|(k, s)| ListedObject {
                        namespace: k.namespace.clone(),
                        name: k.name.clone(),
                        uid: s.meta.uid.clone(),
                    })
                    .collect();
                let id = state.next_list_snapshot;
                state.next_list_snapshot += 1;
                state.list_snapshots.insert(id, objects);
                (id, 0)
            }
            Some(token) => {
                let (id, offset) = token.split_once(':').ok_or_else(expired)?;
                let id: u64 = id.parse().map_err(|_| expired())?;
                (id, offset.parse::<usize>().map_err(|_| expired())?)
            }
        };
        let objects = state.list_snapshots.get(&snapshot).ok_or_else(expired)?;
        let end = objects.len().min(offset + limit.max(1) as usize);
        let items = objects.get(offset..end).unwrap_or_default().to_vec();
        let remaining = objects.len() - end;
        let continue_token = (remaining > 0).then(|| format!("{snapshot}:{end}"));
        if remaining == 0 {
            state.list_snapshots.remove(&snapshot);
        }
        Ok(ListPage { items, continue_token, remaining: Some(remaining as u64) })
    }

    fn serve_patch(
        &self,
        resource: &Resource,
        namespace: &str,
        name: &str,
        patch: &Patch,
    ) -> Result<ObjectMeta, ClusterError> {
        self.begin(Call {
            resource: resource.clone(),
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            request: Request::Patch(patch.clone()),
        })?;
        let key = ObjectKey::new(resource, namespace, name);
        let mut state = self.state.lock();
        // The patch handler refuses the content type before reading the object.
        if patch.patch_type == PatchType::StrategicMerge && state.options(resource).custom {
            return Err(ClusterError::UnsupportedMediaType);
        }
        let current = state.objects.get(&key).ok_or(ClusterError::NotFound)?.meta.clone();
        if state.dry_run {
            return Ok(current);
        }
        let mut next = current.clone();
        apply_patch(&mut next, patch)?;
        if current.deletion_timestamp {
            let added: Vec<&String> =
                next.finalizers.iter().filter(|f| !current.has_finalizer(f)).collect();
            if !added.is_empty() {
                return Err(ClusterError::Invalid(format!(
                    "metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers {added:?}"
                )));
            }
        }
        Ok(state.update(&key, next))
    }

    fn serve_delete(
        &self,
        resource: &Resource,
        namespace: &str,
        name: &str,
        options: &DeleteOptions,
    ) -> Result<(), ClusterError> {
        self.begin(Call {
            resource: resource.clone(),
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            request: Request::Delete(options.clone()),
        })?;
        if self.state.lock().dry_run {
            // Shadow mode answers every DELETE it does not send with success.
            return Ok(());
        }
        self.delete_as_client(resource, namespace, name, options)
    }

    /// Deletes an object as another client's DELETE would (preconditions, graceful deletion,
    /// the registry's GC finalizers), without recording a call or consulting the hooks, so a
    /// hook may call it to delete something before the call it was consulted on is served.
    pub fn delete_as_client(
        &self,
        resource: &Resource,
        namespace: &str,
        name: &str,
        options: &DeleteOptions,
    ) -> Result<(), ClusterError> {
        let key = ObjectKey::new(resource, namespace, name);
        let mut state = self.state.lock();
        let resource_options = state.options(resource);
        let stored = state.objects.get(&key).ok_or(ClusterError::NotFound)?;
        let conflict = |what: &str, want: &str, got: &str, why: &str| {
            ClusterError::Conflict(format!(
                "Operation cannot be fulfilled on {} {name:?}: the {what} in the precondition ({want}) does not match the {what} in record ({got}). {why}",
                resource.resource
            ))
        };
        if let Some(uid) = &options.precondition_uid {
            if *uid != stored.meta.uid {
                let why = "The object might have been deleted and then recreated";
                return Err(conflict("UID", uid, &stored.meta.uid, why));
            }
        }
        if let Some(rv) = &options.precondition_resource_version {
            if *rv != stored.meta.resource_version {
                let why = "The object might have been modified";
                return Err(conflict("ResourceVersion", rv, &stored.meta.resource_version, why));
            }
        }

        // rest.BeforeDelete: a pending graceful deletion is left alone; a graceful resource not
        // yet being deleted starts one; anything else is not graceful.
        let grace = resource_options.grace_period_seconds;
        if stored.meta.deletion_timestamp && stored.grace_period.unwrap_or(0) > 0 {
            return Ok(());
        }
        let graceful = !stored.meta.deletion_timestamp && grace > 0;

        let mut meta = stored.meta.clone();
        let pending_finalizers = !meta.finalizers.is_empty();
        let new_finalizers = deletion_finalizers_for_garbage_collection(
            &meta.finalizers,
            options.propagation_policy,
            resource_options.default_orphan,
        );
        if graceful || pending_finalizers || new_finalizers.is_some() {
            if let Some(finalizers) = new_finalizers {
                meta.finalizers = finalizers;
            }
            if graceful {
                meta.deletion_timestamp = true;
                state.write(&key, meta, Some(grace));
                return Ok(());
            }
            if !meta.finalizers.is_empty() {
                // markAsDeleting: deletionTimestamp (kept if already set), grace period 0.
                meta.deletion_timestamp = true;
                state.write(&key, meta, Some(0));
                return Ok(());
            }
        }
        state.remove(&key, None);
        Ok(())
    }
}

impl Cluster for MemoryCluster {
    fn resource_for(&self, ty: ObjectType) -> Result<Resource, ClusterError> {
        self.state
            .lock()
            .mappings
            .get(&ty)
            .cloned()
            .ok_or_else(|| ClusterError::NoMapping(format!("{}/{}", ty.api_version(), ty.kind())))
    }

    async fn get(
        &self,
        resource: &Resource,
        namespace: &str,
        name: &str,
    ) -> Result<ObjectMeta, ClusterError> {
        self.serve_get(resource, namespace, name)
    }

    fn consistent_lists(&self, resource: &Resource) -> bool {
        !self.state.lock().options(resource).aggregated
    }

    async fn list_page(
        &self,
        resource: &Resource,
        continue_token: Option<&str>,
        limit: u32,
    ) -> Result<ListPage, ClusterError> {
        self.serve_list(resource, continue_token, limit)
    }

    async fn patch(
        &self,
        resource: &Resource,
        namespace: &str,
        name: &str,
        patch: &Patch,
    ) -> Result<ObjectMeta, ClusterError> {
        self.serve_patch(resource, namespace, name, patch)
    }

    async fn delete(
        &self,
        resource: &Resource,
        namespace: &str,
        name: &str,
        options: &DeleteOptions,
    ) -> Result<(), ClusterError> {
        self.serve_delete(resource, namespace, name, options)
    }

    fn record_event(&self, event: WarningEvent) {
        self.state.lock().events.push(event);
    }
}
