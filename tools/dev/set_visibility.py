#!/usr/bin/env python3
"""Makes our packages private by default and opens each library to exactly the
packages whose BUILD files depend on it today (tests and the top-level BUILD
included). Run from the repository root after adding a cross-package dependency:

    tools/dev/set_visibility.py && bazel build //...

proto/, deploy/configs/ and the root package stay public: they are the wire
contract, example configs and the user-facing daemons.
"""
import re, glob, os, collections
os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..'))
pkgs=['common','common/testing','rpc','membership','coordinator','server','server/replication','deploy','worker','worker/cpu','worker/cuda','worker/testing','serve','tools','tools/dev','bench','tests']
allbuild=[b for b in glob.glob('**/BUILD',recursive=True) if not b.startswith(('bazel-','third_party'))]
refs=collections.defaultdict(set)  # (pkg,name) -> set of referencing pkgs
for b in allbuild:
    src_pkg=os.path.dirname(b)
    text=open(b).read()
    for m in re.finditer(r'"//([a-z_/]*)(?::([A-Za-z0-9_.\-]+))?"', text):
        p=m.group(1); n=m.group(2) or os.path.basename(p)
        if p!=src_pkg: refs[(p,n)].add(src_pkg)
rule_re=re.compile(r'^(\w+)\(\n(.*?)^\)\n', re.S|re.M)
for p in pkgs:
    f=os.path.join(p,'BUILD'); s=open(f).read()
    s=s.replace('package(default_visibility = ["//visibility:public"])','package(default_visibility = ["//visibility:private"])')
    if 'default_visibility' not in s:
        # insert after leading comments
        lines=s.split('\n'); i=0
        while i<len(lines) and lines[i].startswith('#'): i+=1
        lines.insert(i,'package(default_visibility = ["//visibility:private"])\n' if i==0 else '\npackage(default_visibility = ["//visibility:private"])')
        s='\n'.join(lines)
    def fix(m):
        kind, body = m.group(1), m.group(2)
        nm=re.search(r'^    name = "([^"]+)",\n', body, re.M)
        if not nm or kind in ('cc_test','sh_test','test_suite'): return m.group(0)
        name=nm.group(1)
        # drop existing visibility attr (single or multi-line)
        body=re.sub(r'^    visibility = \[[^\]]*\],\n', '', body, flags=re.M|re.S)
        users=sorted(refs.get((p,name),()))
        if users:
            if len(users)==1:
                vis='    visibility = ["//%s:__pkg__"],\n' % users[0]
            else:
                vis='    visibility = [\n'+''.join('        "//%s:__pkg__",\n'%u for u in users)+'    ],\n'
            # place after hdrs/srcs if present, else after name
            body=body.replace(nm.group(0), nm.group(0), 1)
            idx=body.find('    deps = [')
            if idx<0: idx=len(body)
            body=body[:idx]+vis+body[idx:]
        return kind+'(\n'+body+')\n'
    s2=rule_re.sub(fix,s)
    open(f,'w').write(s2)
print("set_visibility: done; now run bazel build //...")
