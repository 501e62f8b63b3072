//! `WORKLOAD.md`'s golden values: every row, and the counts table.
//!
//! A generator is correct when it reproduces these rows exactly (`WORKLOAD.md` § Golden
//! values, seed 1, namespaces 1000). Table cases fail with their index.

use kube_gc_bench::workload::{Counts, Order, Workload, WorkloadConfig};

/// N = 100000, owners-first, selected canonical positions.
const OWNERS_FIRST_100K: &[&str] = &[
    "0\tapps/v1\tDeployment\tns-0000\tapp-00000000\t910a2dec-8902-4cc1-beeb-8da1658eec67\t1000001\t-",
    "1\tapps/v1\tDeployment\tns-0001\tapp-00000001\t10e2c468-65e9-4746-94d7-973c5c2a449c\t1000011\t-",
    "7899\tapps/v1\tDeployment\tns-0899\tapp-00007899\t6dc58edd-5dfe-4794-af95-152bf3551c51\t1078991\t-",
    "7900\tapps/v1\tReplicaSet\tns-0000\tapp-00000000-gbt48xsf5p\tf893a2ee-fb32-455e-b1c1-8690ee42c90b\t1000002\tDeployment/app-00000000/910a2dec-8902-4cc1-beeb-8da1658eec67",
    "15800\tv1\tPod\tns-0000\tapp-00000000-gbt48xsf5p-6bmpd\t71bb54d8-d101-45b9-834d-0bff90150280\t1000003\tReplicaSet/app-00000000-gbt48xsf5p/f893a2ee-fb32-455e-b1c1-8690ee42c90b",
    "15801\tv1\tPod\tns-0000\tapp-00000000-gbt48xsf5p-m8rmz\te099ec6c-d736-4ca5-85e7-bb0f12278575\t1000004\tReplicaSet/app-00000000-gbt48xsf5p/f893a2ee-fb32-455e-b1c1-8690ee42c90b",
    "79000\tv1\tConfigMap\tns-0000\tcm-00000000\taa0100f2-72a3-4065-9cea-805e132f9e61\t1079001\t-",
    "99000\tv1\tPod\tns-0000\tgone-00000000-b76rqr24fz-chnz7\t0dc792c0-141c-41a3-ac0b-7255d289a5bd\t1099001\tReplicaSet/gone-00000000-b76rqr24fz/796f9bf2-78ee-46cf-8d3d-d4154f2bda99",
    "99999\tv1\tPod\tns-0999\tgone-00000999-pgtmcmk6b9-f6dfs\t215118d0-fdc0-487d-a6f4-0f5304efe249\t1100000\tReplicaSet/gone-00000999-pgtmcmk6b9/0291950d-4cee-4f5d-99ca-4e84fd5970bf",
];

/// N = 100000, random, first 3.
const RANDOM_100K: &[&str] = &[
    "0\tv1\tConfigMap\tns-0860\tcm-00000860\t04039af2-da65-4fb9-9317-687df4317913\t1079861\t-",
    "1\tv1\tPod\tns-0328\tapp-00005328-wpvd2tjpzr-x9kps\t7bcb7013-6c70-4996-8c27-5a715ea49fb2\t1053284\tReplicaSet/app-00005328-wpvd2tjpzr/f379c3a2-1d82-46b8-b4aa-37c24977f813",
    "2\tv1\tConfigMap\tns-0871\tcm-00010871\t045f60db-f1cc-47b7-b6a5-c10e09939e8c\t1089872\t-",
];

/// N = 1000000, random, first 3.
const RANDOM_1M: &[&str] = &[
    "0\tv1\tConfigMap\tns-0847\tcm-00014847\t42493d44-d9a6-4a7f-97ef-696a82afef1a\t1804848\t-",
    "1\tv1\tPod\tns-0425\tapp-00072425-rjj5jqpwgv-mvggx\t5cc8e484-7c57-4029-9b1f-d1a2593ed7c6\t1724259\tReplicaSet/app-00072425-rjj5jqpwgv/302364ed-f62d-4cac-a174-fe8775a7ea22",
    "2\tv1\tPod\tns-0997\tapp-00054997-7g6rgmvvrv-v759l\t5dc854a6-719e-4b82-979c-eef77d913a56\t1549978\tReplicaSet/app-00054997-7g6rgmvvrv/c63ea96f-8837-45f7-a810-2ff3a0f50899",
];

fn check_rows(w: &Workload, rows: &[&str]) {
    for (i, want) in rows.iter().enumerate() {
        let idx: usize = want.split('\t').next().unwrap().parse().unwrap();
        let got = w.golden_row(idx);
        assert_eq!(got, *want, "#{i}: got {got:?}, want {want:?}");
    }
}

#[test]
fn owners_first_100k_reproduces_the_golden_rows() {
    let w = Workload::generate(&WorkloadConfig::new(100_000, Order::OwnersFirst));
    check_rows(&w, OWNERS_FIRST_100K);
}

#[test]
fn random_100k_reproduces_the_golden_rows() {
    let w = Workload::generate(&WorkloadConfig::new(100_000, Order::Random));
    check_rows(&w, RANDOM_100K);
}

#[test]
fn random_1m_reproduces_the_golden_rows() {
    let w = Workload::generate(&WorkloadConfig::new(1_000_000, Order::Random));
    check_rows(&w, RANDOM_1M);
}

#[test]
fn dependents_first_is_the_canonical_list_reversed() {
    let canonical = Workload::generate(&WorkloadConfig::new(10_000, Order::OwnersFirst));
    let reversed = Workload::generate(&WorkloadConfig::new(10_000, Order::DependentsFirst));
    let n = canonical.events().len();
    for i in 0..n {
        assert_eq!(reversed.events()[i], canonical.events()[n - 1 - i], "#{i}");
    }
}

#[test]
fn counts_match_the_table() {
    // (N, F, 10F, S, V, graph nodes after warm-up)
    let table = [
        (100_000, 7_900, 79_000, 20_000, 1_000, 101_000),
        (1_000_000, 79_000, 790_000, 200_000, 10_000, 1_010_000),
        (3_000_000, 237_000, 2_370_000, 600_000, 30_000, 3_030_000),
    ];
    for (i, &(n, f, ten_f, s, v, nodes)) in table.iter().enumerate() {
        let c = Counts::for_objects(n);
        let got =
            (c.families, 10 * c.families, c.configmaps, c.virtual_owner_pods, c.graph_nodes());
        assert_eq!(got, (f, ten_f, s, v, nodes), "#{i}: N={n}");
    }
}

#[test]
fn generated_objects_follow_the_counts() {
    for (i, order) in Order::ALL.into_iter().enumerate() {
        let w = Workload::generate(&WorkloadConfig::new(100_000, order));
        let c = w.counts();
        let kinds = |kind: &str| w.events().iter().filter(|e| e.object_type.kind() == kind).count();
        assert_eq!(w.events().len(), 100_000, "#{i}");
        assert_eq!(kinds("Deployment"), c.families, "#{i}");
        assert_eq!(kinds("ReplicaSet"), c.families, "#{i}");
        assert_eq!(kinds("Pod"), 8 * c.families + c.virtual_owner_pods, "#{i}");
        assert_eq!(kinds("ConfigMap"), c.configmaps, "#{i}");
        let uids: std::collections::HashSet<&str> =
            w.events().iter().map(|e| e.object.uid.as_str()).collect();
        assert_eq!(uids.len(), 100_000, "#{i}: UIDs are unique");
    }
}

#[test]
fn expected_attempt_to_delete_is_v_then_v_plus_2f_then_between() {
    let n = 100_000;
    let c = Counts::for_objects(n);
    let of =
        |order| Workload::generate(&WorkloadConfig::new(n, order)).expected_attempt_to_delete();
    assert_eq!(of(Order::OwnersFirst), c.virtual_owner_pods);
    assert_eq!(of(Order::DependentsFirst), c.virtual_owner_pods + 2 * c.families);
    let random = of(Order::Random);
    assert!(random > c.virtual_owner_pods && random < c.virtual_owner_pods + 2 * c.families);
}
