#!/usr/bin/env python3
"""Checks dafuse's include graph: includes run downward between folders, no header reaches into
another folder's `detail` namespace, and there is no cycle among headers.

Folders are ranked by DESIGN.md's layering (core <- nn <- policy <- data/select <- backend <- step
<- train); a header may include its own folder and any folder ranked below it. Two rules keep the
systems apart: above backend/, a header includes only the dispatch point (backend/executor.hpp,
backend/default_system.hpp), never a system's folder; and within backend/, a system's folder
includes only itself, backend's own headers, and (a device system) the shared device executor.
Run:
    tools/check_includes.py [include-dir]
Exits 1 and prints each offending edge when the graph breaks a rule.
"""
import pathlib
import re
import sys

RANK = {
    'config.hpp': 0,
    'core': 1,
    'nn': 2,
    'policy': 3,
    'head': 4,
    'data': 4,
    'select': 4,
    'backend': 5,
    'step': 6,
    'train': 7,
    'dafuse.hpp': 8,
}
# The C++ namespace each folder's code lives in, for the `detail` rule.
NAMESPACE = {'backend': 'backend', 'data': 'data', 'select': 'select', 'nn': 'nn',
             'policy': 'policy', 'head': 'head'}

# backend's system folders, and the ones each may include besides backend's own headers.
SYSTEM_FOLDERS = {
    'host': {'host'},
    'device': {'device'},
    'cuda': {'cuda', 'device'},
    'omp_device': {'omp_device', 'device'},
}
# What a header above backend/ may include of it: the dispatch point.
BACKEND_ENTRY = {'backend/executor.hpp', 'backend/default_system.hpp'}
# Headers above backend/ that still reach into a system's folder, each with why. The check fails
# when one no longer does, so the list only shrinks.
BACKEND_EXCEPTIONS = {
    'step/eager_step.hpp': 'the eager baseline is a second host executor until it becomes an '
                           'executor of its own (issue 48)',
    'step/model.hpp': 'a saved model predicts on the host kernels (issue 48)',
}

INCLUDE = re.compile(r'^\s*#\s*include\s*<dafuse/([^>]+)>', re.M)
# A qualified use of a nested namespace's detail (`host::detail::x`, `gen::detail::x` through an
# alias); dafuse's own top-level detail is shared by every folder.
DETAIL_USE = re.compile(r'\b(\w+)::detail::')


def folder(rel):
    return rel.split('/')[0]


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else
                        pathlib.Path(__file__).resolve().parent.parent / 'include')
    base = root / 'dafuse'
    headers = {str(p.relative_to(base)): p for p in base.rglob('*.hpp')}
    headers.update({str(p.relative_to(base)): p for p in base.rglob('*.cuh')})
    graph, problems = {}, []
    for rel, path in sorted(headers.items()):
        text = path.read_text(encoding='utf-8')
        src = folder(rel)
        if src not in RANK:
            problems.append(f'{rel}: folder {src!r} has no rank in tools/check_includes.py')
            continue
        graph[rel] = []
        reaches_in = False
        for target in INCLUDE.findall(text):
            if target not in headers:
                problems.append(f'{rel}: includes <dafuse/{target}>, which does not exist')
                continue
            graph[rel].append(target)
            dst = folder(target)
            if dst != src and RANK[dst] >= RANK[src]:
                problems.append(f'{rel} -> {target}: {src} (rank {RANK[src]}) may not include '
                                f'{dst} (rank {RANK[dst]})')
            if dst == 'backend' and src != 'backend' and target not in BACKEND_ENTRY:
                reaches_in = True
                if rel not in BACKEND_EXCEPTIONS:
                    problems.append(f'{rel} -> {target}: above backend/, include only '
                                    + ' or '.join(sorted(BACKEND_ENTRY)))
            parts, target_parts = rel.split('/'), target.split('/')
            if src == 'backend' == dst and len(parts) > 2 and len(target_parts) > 2:
                mine, theirs = parts[1], target_parts[1]
                if theirs not in SYSTEM_FOLDERS.get(mine, {mine}):
                    problems.append(f'{rel} -> {target}: backend/{mine}/ may not include '
                                    f'backend/{theirs}/')
        if rel in BACKEND_EXCEPTIONS and not reaches_in:
            problems.append(f'{rel}: no longer reaches into backend/; remove it from '
                            'BACKEND_EXCEPTIONS')
        for m in DETAIL_USE.finditer(text):
            owner = m.group(1)
            if owner != 'dafuse' and NAMESPACE.get(src) != owner and not (
                    src == 'backend' and owner in ('host', 'cuda')):
                line = text.count('\n', 0, m.start()) + 1
                problems.append(f'{rel}:{line}: reaches into {owner}\'s detail namespace')
    # Cycles: depth-first search with colours.
    state = {}

    def visit(node, stack):
        state[node] = 1
        stack.append(node)
        for nxt in graph.get(node, []):
            if state.get(nxt) == 1:
                problems.append('cycle: ' + ' -> '.join(stack[stack.index(nxt):] + [nxt]))
            elif nxt not in state:
                visit(nxt, stack)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [])
    for p in problems:
        print('dafuse include graph:', p)
    edges = sum(len(v) for v in graph.values())
    print(f'{len(graph)} headers, {edges} includes: '
          + ('no upward edge, no cycle, no foreign detail' if not problems else
             f'{len(problems)} problem(s)'))
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main())
