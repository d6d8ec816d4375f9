#!/usr/bin/python3
"""One results row (a JSON line on stdout) for a Downpour run of run.sh.

    bench/parity/downpour_row.py dense SUMMARY NAME LEARNER RC
    bench/parity/downpour_row.py sparse SUMMARY FINAL NAME LEARNER RC

SUMMARY is the launcher's summary.json, RC its exit status. dense: the
metrics are the summary's. sparse: they are FINAL's (sparse_eval.py's
final_model.json, with the ps rows and nonzero weights), else the summary's,
with a note saying so. Either way a note names a launcher exit other than 0
and an outcome other than "succeeded".
"""
import json
import sys


def dense_row(s, name, learner):
    m = s.get("metrics")
    if not m and s.get("accuracy") is not None:  # a launcher from before "metrics"
        m = {"accuracy": s["accuracy"]}
    row = {"dataset": name, "learner": learner, "metrics": m or {},
           "seconds": s.get("seconds"), "task": s.get("task")}
    return row, []


def sparse_row(s, final, name, learner):
    row = {"dataset": name, "learner": learner, "metrics": {}, "seconds": s.get("seconds"),
           "summary_metrics": s.get("metrics") or {}}
    notes = []
    try:
        f = json.load(open(final))
        row["metrics"] = f["metrics"]
        row["nonzero"] = f["nonzero"]
        row["rows"] = f["rows"]
        if not f.get("rows_match_train_keys", True):
            notes.append("ps rows differ from the Python keys of the training rows")
    except (OSError, ValueError, KeyError):
        row["metrics"] = row["summary_metrics"]
        if "_fm_" in learner or "_wide_deep_" in learner:
            notes.append("the workers' final evaluation (summary.json)")
        else:
            notes.append("no final checkpoint read: metrics are summary.json's")
    return row, notes


def main(argv):
    kind, path = argv[1], argv[2]
    s = json.load(open(path))
    if kind == "dense":
        name, learner, rc = argv[3:6]
        row, notes = dense_row(s, name, learner)
    else:
        final, name, learner, rc = argv[3:7]
        row, notes = sparse_row(s, final, name, learner)
    if rc != "0":
        notes.append(f"launcher exit {rc}")
    if s.get("outcome") not in (None, "succeeded"):
        notes.append(f"outcome {s.get('outcome')}: {s.get('failure', '')}".strip(": "))
    if notes:
        row["note"] = "; ".join(notes)
    print(json.dumps(row))


if __name__ == "__main__":
    main(sys.argv)
