//! A process's deadlines that keep finding their streams moved raise an
//! alarm of their own, which names the cause: the process is behind its
//! streams (a moved stream once is a race, decided again: not trouble).

use super::*;

#[test]
fn deadlines_moved_for_fifteen_minutes_say_the_process_is_behind() {
    let template = template();
    let behind = &resource(&template, "PaymentsDeadlinesBehindAlarm")["Properties"];
    assert_eq!(behind["MetricName"], "DeadlinesMoved");
    assert_eq!(
        intrinsic(&behind["Dimensions"][0]["Value"]),
        "Sub ${AWS::StackName}-payments"
    );
    // Once is a race; in each of three 5-minute periods, the process is behind.
    assert_eq!(
        (
            behind["Statistic"].as_str(),
            behind["Period"].as_u64(),
            behind["EvaluationPeriods"].as_u64(),
            behind["Threshold"].as_u64(),
        ),
        (Some("Sum"), Some(300), Some(3), Some(0))
    );
    let description = behind["AlarmDescription"].as_str().unwrap_or_default();
    for part in [
        "Payments process",
        "kept finding their streams moved",
        "the process is behind its streams",
        "queue's backlog",
        "parked events",
        "docs/operate.md",
    ] {
        assert!(description.contains(part), "`{part}` not in {description}");
    }
    assert!(
        one_or_many(&behind["AlarmActions"])
            .iter()
            .any(|action| intrinsic(action) == "Ref AlarmTopic")
    );
    assert!(
        sequence_guard::metrics::emitted().contains(&"DeadlinesMoved"),
        "the function emits what it watches"
    );
}
