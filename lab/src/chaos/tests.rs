use super::*;

#[test]
fn scenarios_should_be_drawn_from_the_seed() {
    let draw = |seed| {
        let mut rng = SplitMix64::new(seed);
        (0..32).map(|_| Shape::draw(&mut rng)).collect::<Vec<_>>()
    };
    assert_eq!(draw(5), draw(5));
    assert_ne!(draw(5), draw(6));
    let all = draw(5);
    assert!(all.iter().any(|s| matches!(s, Shape::Chain { cycle: true, .. })));
    assert!(all.iter().any(|s| s.needs_crd()));
}

#[test]
fn policy_should_orphan_for_orphan_and_legacy_default() {
    assert!(Policy::Orphan.orphans(CONFIGMAP));
    assert!(Policy::Default.orphans(RC));
    assert!(!Policy::Default.orphans(DEPLOYMENT));
    assert!(!Policy::Foreground.orphans(RC));
}

#[test]
fn report_totals_should_be_one_line_with_the_verdict() {
    let report = Report {
        seeds: vec![SeedReport {
            seed: 1,
            scenarios: vec!["a".into(), "b".into()],
            converged_in: Some(Duration::from_secs(1)),
            deletions_checked: 3,
            ..SeedReport::default()
        }],
    };
    let line = report.totals();
    assert!(!line.contains('\n'));
    assert!(line.contains("scenarios=2 seeds=1"), "{line}");
    assert!(line.contains("deletions_checked=3 wrongful_deletions=0"), "{line}");
    assert!(line.ends_with("verdict=ok"), "{line}");
}
