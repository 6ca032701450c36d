"""``switchboard memory``: documents into an agent's memory (``ingest``: files, or folders of
Markdown, text, PDF and HTML), ``search`` it, ``show`` lines of a document, ``forget`` one;
through the running system's gateway (``/api/memory``)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from switchboard.cli.admin_client import AdminError, Gateway

DOCUMENT_TYPES = {
    ".md": "text/markdown",
    ".markdown": "text/markdown",
    ".txt": "text/plain",
    ".pdf": "application/pdf",
    ".html": "text/html",
    ".htm": "text/html",
}


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser("memory", help="agent memory: ingest, search, show, forget")
    parser.add_argument("--home", help="data dir (default: $SB_HOME or ~/.switchboard)")
    parser.add_argument("--agent", default="", help="the agent (default: the default agent)")
    parser.add_argument("--user", default="", help="a scope inside the agent (default: its own)")
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    ingest = actions.add_parser("ingest", help="add documents (files or folders)")
    ingest.add_argument("paths", nargs="+", type=Path)
    ingest.add_argument("--as", dest="name", default="", help="the name of a single document")
    search = actions.add_parser("search", help="search the agent's memory")
    search.add_argument("query")
    search.add_argument("-k", type=int, default=5)
    search.add_argument("--mode", default="hybrid", choices=("hybrid", "vector", "keyword"))
    search.add_argument("--json", action="store_true")
    show = actions.add_parser("show", help="lines of a document")
    show.add_argument("path")
    show.add_argument("--from", dest="from_line", type=int, default=1)
    show.add_argument("--lines", type=int, default=0)
    forget = actions.add_parser("forget", help="remove a document from memory")
    forget.add_argument("path")
    parser.set_defaults(func=run)


def documents(paths: list[Path]) -> list[tuple[Path, str]]:
    """Every document under ``paths`` with the name it gets in memory (relative to the folder
    given, or the file's name); other files in folders are skipped."""
    found: list[tuple[Path, str]] = []
    for given in paths:
        if given.is_dir():
            for path in sorted(given.rglob("*")):
                if path.is_file() and path.suffix.lower() in DOCUMENT_TYPES:
                    found.append((path, path.relative_to(given).as_posix()))
        elif given.is_file():
            found.append((given, given.name))
        else:
            raise AdminError(f"{given}: no such file or folder")
    return found


def _ingest(gateway: Gateway, args: argparse.Namespace) -> None:
    found = documents(args.paths)
    if args.name and len(found) != 1:
        raise AdminError("--as names a single document")
    if not found:
        raise AdminError("no documents found (.md, .txt, .pdf, .html)")
    for path, name in found:
        mime = DOCUMENT_TYPES.get(path.suffix.lower(), "text/plain")
        params = {"path": args.name or name, "agent": args.agent, "user": args.user}
        reply = gateway.send(
            "POST", "/api/memory/documents", params, content=path.read_bytes(), content_type=mime
        )
        state = "unchanged" if reply["unchanged"] else f"{reply['chunks']} chunks"
        note = f" ({reply['degraded']})" if reply["degraded"] else ""
        print(f"{reply['path']}: {state}, {reply['characters']} characters{note}")


def run(args: argparse.Namespace) -> int:
    try:
        gateway = Gateway.from_environment(args.home)
        scope = {"agent": args.agent, "user": args.user}
        if args.action == "ingest":
            _ingest(gateway, args)
        elif args.action == "search":
            found = gateway.call(
                "GET", "/api/memory/search", q=args.query, k=str(args.k), mode=args.mode, **scope
            )
            if args.json:
                print(json.dumps(found, indent=2))
            else:
                if found["degraded"]:
                    print(f"note: {found['degraded']}")
                for hit in found["hits"]:
                    where = f"{hit['path']}:{hit['start_line']}" if hit["path"] else hit["source"]
                    print(f"{hit['score']:.3f}  {where}  {hit['text'][:200]!r}")
                if not found["hits"]:
                    print("no matches")
        elif args.action == "show":
            got = gateway.call(
                "GET",
                "/api/memory/documents/lines",
                path=args.path,
                from_line=str(args.from_line),
                lines=str(args.lines),
                **scope,
            )
            print(got["text"])
        else:
            done = gateway.call("DELETE", "/api/memory/documents", path=args.path, **scope)
            print(f"forgot {done['path']} ({done['deleted']} chunks)")
    except (AdminError, OSError) as exc:
        print(f"switchboard memory: {exc}", file=sys.stderr)
        return 1
    return 0
