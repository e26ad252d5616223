import json, glob, re, sys
from collections import Counter
for run in sys.argv[1:]:
    c = Counter(); rows = []
    for f in sorted(glob.glob(run + "/trajectories/*/*.json")):
        t = json.load(open(f))
        passed = bool(t["grades"] and t["grades"][0]["passed"])
        c["trajs"] += 1; c["passed"] += passed
        for s in t["steps"]:
            o = str(s.get("observation") or ""); a = s.get("action") or {}
            c["turns"] += 1
            if "FileNotFoundError" in o: c["fnf cells"] += 1
            if re.search(r"NameError: name '\w+' is not defined", o): c["nameerror cells"] += 1
            if "people.csv" in str(a.get("content", "")) or "sales.csv" in str(a.get("content", "")): c["example-file cells"] += 1
            if "does not exist yet" in o or "There is no file" in o: c["new notes shown"] += 1
        if any(g.get("kind") == "example_copy" for g in (t.get("guards") or [])) or "example_copy" in str(t["grades"]): c["example_copy"] += 1
        rows.append((f.split("/")[-2], passed, len(t["steps"]), t["status"]))
    print(run, dict(c))
    print("  ", " ".join(f"{r[0]}:{'P' if r[1] else '-'}{r[2]}" for r in rows))
