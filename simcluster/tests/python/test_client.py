"""Python's official `kubernetes` client against a simcluster.

Run by simcluster/tests/python_client.rs, which starts the simcluster and passes its kubeconfig
in $SIMCLUSTER_KUBECONFIG:

    SIMCLUSTER_KUBECONFIG=/tmp/sim.kubeconfig python3 -m unittest -v test_client

Covers list, get, create, patch (strategic merge, JSON merge, JSON patch), delete with each
propagation policy and with preconditions, and watch with a server-side timeout.
"""

import os
import threading
import time
import unittest

from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

NS = "default"


def api_client():
    return config.new_client_from_config(config_file=os.environ["SIMCLUSTER_KUBECONFIG"])


def configmap(name, finalizers=None, owner=None):
    meta = client.V1ObjectMeta(name=name, finalizers=finalizers)
    if owner is not None:
        meta.owner_references = [
            client.V1OwnerReference(api_version="v1", kind="ConfigMap", name=owner.metadata.name,
                                    uid=owner.metadata.uid)
        ]
    return client.V1ConfigMap(metadata=meta, data={"k": "v"})


class ClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.api = api_client()
        cls.core = client.CoreV1Api(cls.api)
        cls.apps = client.AppsV1Api(cls.api)

    def status_of(self, fn, *args, **kwargs):
        with self.assertRaises(ApiException) as e:
            fn(*args, **kwargs)
        return e.exception.status

    def test_list_and_get(self):
        names = [n.metadata.name for n in self.core.list_namespace().items]
        self.assertIn("kube-system", names)
        for i in range(3):
            self.core.create_namespaced_config_map(NS, configmap(f"list-{i}"))
        page = self.core.list_namespaced_config_map(NS, limit=2, label_selector="")
        self.assertEqual(len(page.items), 2)
        self.assertTrue(page.metadata._continue)
        rest = self.core.list_namespaced_config_map(NS, limit=100, _continue=page.metadata._continue)
        listed = [c.metadata.name for c in page.items + rest.items]
        for i in range(3):
            self.assertIn(f"list-{i}", listed)
        got = self.core.read_namespaced_config_map("list-1", NS)
        self.assertEqual(got.data, {"k": "v"})
        self.assertEqual(len(got.metadata.uid), 36)
        self.assertEqual(self.status_of(self.core.read_namespaced_config_map, "absent", NS), 404)

    def test_create_conflicts_and_generate_name(self):
        self.core.create_namespaced_config_map(NS, configmap("dup"))
        self.assertEqual(
            self.status_of(self.core.create_namespaced_config_map, NS, configmap("dup")), 409)
        generated = client.V1ConfigMap(metadata=client.V1ObjectMeta(generate_name="gen-"))
        made = self.core.create_namespaced_config_map(NS, generated)
        self.assertTrue(made.metadata.name.startswith("gen-") and len(made.metadata.name) > 4)
        deploy = {
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
            "spec": {"selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": {"containers": [{"name": "c", "image": "x"}]}}},
        }
        made = self.apps.create_namespaced_deployment(NS, deploy)
        self.assertEqual(made.spec.template.spec.containers[0].image, "x")

    def test_patch(self):
        owner = self.core.create_namespaced_config_map(NS, configmap("patch-owner"))
        self.core.create_namespaced_config_map(NS, configmap("patched"))
        # A dict body is sent as a strategic merge patch: finalizers merge as a set.
        self.core.patch_namespaced_config_map(
            "patched", NS, {"metadata": {"finalizers": ["example.com/a"]}})
        out = self.core.patch_namespaced_config_map(
            "patched", NS, {"metadata": {"finalizers": ["example.com/b"],
                                         "ownerReferences": [{
                                             "apiVersion": "v1", "kind": "ConfigMap",
                                             "name": "patch-owner", "uid": owner.metadata.uid}]}})
        self.assertEqual(out.metadata.finalizers, ["example.com/a", "example.com/b"])
        self.assertEqual(out.metadata.owner_references[0].uid, owner.metadata.uid)
        # $patch: delete removes the reference by uid.
        out = self.core.patch_namespaced_config_map(
            "patched", NS, {"metadata": {"ownerReferences": [
                {"$patch": "delete", "uid": owner.metadata.uid}]}})
        self.assertFalse(out.metadata.owner_references)
        # A list body is sent as a JSON patch; a failed `test` is 422.
        out = self.core.patch_namespaced_config_map(
            "patched", NS, [{"op": "test", "path": "/metadata/uid", "value": out.metadata.uid},
                            {"op": "remove", "path": "/metadata/finalizers"}])
        self.assertFalse(out.metadata.finalizers)
        self.assertEqual(self.status_of(
            self.core.patch_namespaced_config_map, "patched", NS,
            [{"op": "test", "path": "/metadata/uid", "value": "wrong"}]), 422)
        # A stale resourceVersion in the body is a 409 precondition failure.
        stale = self.core.read_namespaced_config_map("patched", NS)
        self.core.patch_namespaced_config_map("patched", NS, {"data": {"k": "w"}})
        stale.data = {"k": "stale"}
        self.assertEqual(
            self.status_of(self.core.replace_namespaced_config_map, "patched", NS, stale), 409)

    def test_delete_with_propagation_policies(self):
        for policy, finalizer in [("Foreground", "foregroundDeletion"), ("Orphan", "orphan")]:
            name = f"del-{policy.lower()}"
            self.core.create_namespaced_config_map(NS, configmap(name))
            self.core.delete_namespaced_config_map(
                name, NS, body=client.V1DeleteOptions(propagation_policy=policy))
            kept = self.core.read_namespaced_config_map(name, NS)
            self.assertEqual(kept.metadata.finalizers, [finalizer], policy)
            self.assertIsNotNone(kept.metadata.deletion_timestamp, policy)
            # Removing the finalizer completes the deletion.
            self.core.patch_namespaced_config_map(name, NS, {"metadata": {"finalizers": None}})
            self.assertEqual(self.status_of(self.core.read_namespaced_config_map, name, NS), 404)
        self.core.create_namespaced_config_map(NS, configmap("del-background"))
        self.core.delete_namespaced_config_map("del-background", NS,
                                               propagation_policy="Background")
        self.assertEqual(
            self.status_of(self.core.read_namespaced_config_map, "del-background", NS), 404)
        # Preconditions: a uid that does not match is a 409, and nothing is deleted.
        self.core.create_namespaced_config_map(NS, configmap("del-pre"))
        body = client.V1DeleteOptions(preconditions=client.V1Preconditions(uid="not-the-uid"))
        self.assertEqual(self.status_of(
            self.core.delete_namespaced_config_map, "del-pre", NS, body=body), 409)
        self.core.read_namespaced_config_map("del-pre", NS)
        self.assertEqual(
            self.status_of(self.core.delete_namespaced_config_map, "absent", NS), 404)

    def test_watch_with_a_timeout(self):
        rv = self.core.list_namespaced_config_map(NS).metadata.resource_version

        def later():
            time.sleep(0.3)
            self.core.create_namespaced_config_map(NS, configmap("watched"))
            self.core.patch_namespaced_config_map("watched", NS, {"data": {"k": "w"}})
            self.core.delete_namespaced_config_map("watched", NS)

        writer = threading.Thread(target=later)
        writer.start()
        seen = []
        w = watch.Watch()
        started = time.monotonic()
        for event in w.stream(self.core.list_namespaced_config_map, NS, resource_version=rv,
                              timeout_seconds=20):
            if event["object"].metadata.name == "watched":
                seen.append(event["type"])
            if event["type"] == "DELETED":
                w.stop()
        writer.join()
        self.assertEqual(seen, ["ADDED", "MODIFIED", "DELETED"])
        # With nothing happening, the server ends the watch at timeoutSeconds.
        rv = self.core.list_namespaced_config_map(NS).metadata.resource_version
        started = time.monotonic()
        events = list(watch.Watch().stream(self.core.list_namespaced_config_map, NS,
                                           resource_version=rv, timeout_seconds=1))
        self.assertEqual(events, [])
        self.assertLess(time.monotonic() - started, 30)


if __name__ == "__main__":
    unittest.main(verbosity=2)
