#!/usr/bin/env python3
"""Own logic per controller (issue 24; `python3 hack/ownlogic.py . [noimports]`): the share of a controller package's non-test
code lines (no blanks, no comments) that is not wiring. Wiring: package and
import clauses, the reconciler struct, the pass alias and state struct,
SetupWithManager and the setup* helpers it calls, Reconcile (the skeleton
pass-through), CacheByObject (the cache), the metric declarations, RBAC
markers. Everything else (steps, summarize, cleanup, the Job the kind
renders, its own helpers, its transition Events) is the kind's own logic.

A Reconcile method is wiring only when it is that pass-through (its body one
`return x.Reconcile(ctx, req)`): the restore operator's scratch-pod
controller (scratch.go) has a Reconcile of its own that decides when a
verification's pod is reported and released — the kind's own logic, which
the name alone had counted as wiring."""
import re, sys, glob, os
EXCLUDE_IMPORTS = False
RECONCILE = re.compile(r'^func \([^)]*\) Reconcile\(')
PASS_THROUGH = re.compile(r'^\s*return [A-Za-z_.]+\.Reconcile\(ctx, req\)$')
def pass_through(lines, i):
    """Whether the Reconcile at lines[i] is the skeleton pass-through."""
    body = []
    j = i + 1
    while j < len(lines) and lines[j] != '}':
        if lines[j].strip() and not lines[j].strip().startswith('//'): body.append(lines[j])
        j += 1
    return len(body) == 1 and PASS_THROUGH.match(body[0]) is not None
WIRING_FUNCS = re.compile(r'^func (\([^)]*\) )?(SetupWithManager|CacheByObject|setup[A-Za-z]*|forgetMetrics|observe)\(')
def classify(path):
    own = wiring = 0
    lines = open(path).read().split('\n')
    i = 0
    n = len(lines)
    while i < n:
        l = lines[i]
        s = l.strip()
        if not s or (s.startswith('//') and not s.startswith('// +kubebuilder')):
            i += 1; continue
        if s.startswith("package "):
            i += 1; continue
        if s.startswith("// +kubebuilder"):
            wiring += 1; i += 1; continue
        if s.startswith('import ('):
            j = i
            while lines[j].strip() != ')': j += 1
            if not EXCLUDE_IMPORTS:
                wiring += sum(1 for x in lines[i:j+1] if x.strip() and not x.strip().startswith('//'))
            i = j + 1; continue
        block_wiring = None
        if WIRING_FUNCS.match(l) or (RECONCILE.match(l) and pass_through(lines, i)) or re.match(r'^type ([A-Za-z]*Reconciler|state|pass)\b', l) or \
           (os.path.basename(path) == 'metrics.go' and re.match(r'^(var|func)', l)):
            block_wiring = True
        elif re.match(r'^(func|type|var|const)\b', l):
            block_wiring = False
        if block_wiring is not None and (l.rstrip().endswith('{') or l.rstrip().endswith('(')):
            j = i + 1
            closer = '}' if l.rstrip().endswith('{') else ')'
            while j < n and lines[j] != closer: j += 1
            cnt = sum(1 for x in lines[i:j+1] if x.strip() and not x.strip().startswith('//'))
            if block_wiring: wiring += cnt
            else: own += cnt
            i = j + 1; continue
        if block_wiring: wiring += 1
        else: own += 1
        i += 1
    return own, wiring
root = sys.argv[1]
EXCLUDE_IMPORTS = len(sys.argv) > 2
for op in ['backup', 'restore', 'migration', 'orchestrator']:
    own = wiring = 0
    for f in sorted(glob.glob(f'{root}/operators/{op}/internal/controller/*.go')):
        if f.endswith('_test.go'): continue
        o, w = classify(f); own += o; wiring += w
    print(f'{op:13s} own {own:5d}  wiring {wiring:4d}  own share {100*own/(own+wiring):.1f}%')
