"""``openum config options|show|check``: inspect the option registry and configuration files."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from openum._errors import ConfigError
from openum.config import ENV_POLICY, REGISTRY, SCOPES, Config, Option

__all__ = ["register", "render_markdown"]


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    cfg = sub.add_parser(
        "config",
        help="inspect options and configuration files",
        description="Inspect the option registry and configuration files.",
    )
    cfg_sub = cfg.add_subparsers(dest="config_command", metavar="SUBCOMMAND")
    cfg.set_defaults(handler=lambda args: (cfg.print_help(sys.stderr), 2)[1])

    opts = cfg_sub.add_parser(
        "options",
        help="list every option (name, scope, type, default)",
        description="List the option registry.",
    )
    opts.add_argument("--scope", choices=SCOPES, help="only this scope")
    opts.add_argument(
        "--format",
        choices=("table", "tsv", "json", "markdown"),
        default="table",
        help="table (default), tsv (scope, option, type, default, status), json or markdown; the status says "
        "whether openum implements the option: implemented, not implemented, or partial: VALUES",
    )
    opts.set_defaults(handler=cmd_options)

    show = cfg_sub.add_parser(
        "show",
        parents=[common],
        help="print the effective configuration",
        description="Print the effective configuration, one 'scope option value' per line.",
    )
    show.add_argument("--context-name", metavar="NAME", help="resolve XML settings for this context name")
    show.add_argument("--topic", metavar="TOPIC", help="resolve per-topic settings for this topic")
    show.add_argument(
        "--changed",
        action="store_true",
        help="only options that differ from the defaults, each with where it was set",
    )
    show.add_argument("--scope", choices=SCOPES, help="only this scope")
    show.set_defaults(handler=cmd_show)

    check = cfg_sub.add_parser(
        "check",
        parents=[common],
        help="validate configuration files",
        description="Validate configuration files (flat or XML). Errors are printed "
        "as FILE:LINE: message; the exit status is 2 if any is found.",
    )
    check.add_argument("files", nargs="+", metavar="FILE")
    check.set_defaults(handler=cmd_check)


def _type_name(opt: Option) -> str:
    return opt.type.kind


def _status(scope: str, opt: Option) -> str:
    return REGISTRY.support(scope, opt.name).text


def cmd_options(args: argparse.Namespace) -> int:
    pairs = list(REGISTRY.pairs(args.scope))
    out = sys.stdout
    if args.format == "tsv":
        for scope, opt in pairs:
            out.write(f"{scope}\t{opt.name}\t{_type_name(opt)}\t{opt.default_text}\t{_status(scope, opt)}\n")
    elif args.format == "json":
        rows = [
            {
                "scope": scope,
                "option": opt.name,
                "type": _type_name(opt),
                "default": opt.default_text,
                "status": _status(scope, opt),
                "allowed": opt.allowed,
                "unit": opt.unit,
                "doc": opt.doc,
                "section": opt.section,
                "default_from": opt.default_from,
                "note": opt.note,
                "session": opt.session,
                "deprecated": opt.deprecated,
            }
            for scope, opt in pairs
        ]
        json.dump(rows, out, indent=1)
        out.write("\n")
    elif args.format == "markdown":
        out.write(render_markdown(args.scope))
    else:
        width = max((len(opt.name) for _, opt in pairs), default=10)
        live = 0
        for scope, opt in pairs:
            default = opt.default_text or "-"
            unit = f" {opt.unit}" if opt.unit and opt.default_text else ""
            status = _status(scope, opt)
            live += status != "not implemented"
            value = f"{default}{unit}"
            out.write(f"{scope:<18} {opt.name:<{width}} {_type_name(opt):<12} {value:<24} {status}\n")
        out.write(
            f"\n{len(pairs)} (scope, option) pairs, {live} implemented (fully or partly); the others are "
            "refused when set to anything but their default. 'openum config options --format json' has "
            "the docs.\n"
        )
    return 0


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(scope: str | None = None) -> str:
    """The configuration reference (docs/configuration.md), generated from the registry."""
    lines = [
        "# Configuration reference",
        "",
        "Generated from the option registry (`src/openum/config/_options.py`) by",
        "`openum config options --format markdown`; do not edit by hand.",
        "",
        "Every option keeps UM's name and scope, so UM flat configuration files",
        "(`scope option value` lines) and XML files (`<um-configuration>`) load unchanged. *Default from*:",
        "`guide` = stated in the UM Concepts Guide at the section given; `um` = UM's documented default",
        "(UM Configuration Guide); `openum` = openum's own choice (see the note). *Session* options",
        "belong to a transport session: when sources (receivers) share a session, the first one's value",
        "wins.",
        "",
        "*Status* says what openum implements. An option marked *not implemented* is listed so that UM",
        "configurations are understood, but setting it to anything other than its default is refused",
        "with a configuration error naming the option, its scope and the file and line, because an option",
        "that is accepted and then ignored would look configured and not be (a `use_tls 1` that leaves",
        "traffic in clear text). *partial* lists the values that are implemented. To run a large UM",
        "configuration anyway, set `OPENUM_UNIMPLEMENTED_OPTIONS=warn` (or give `--allow-unimplemented`",
        'to any `openum` command, or call `openum.config.set_unimplemented_policy("warn")`): those',
        "options are then accepted, have no effect, and every context logs one warning per option",
        "([configuration-files.md](configuration-files.md#options-openum-does-not-implement)).",
        "",
    ]
    for s in SCOPES if scope is None else (scope,):
        pairs = list(REGISTRY.pairs(s))
        if not pairs:
            continue
        live = sum(1 for _, opt in pairs if _status(s, opt) != "not implemented")
        lines += [f"## Scope `{s}` ({len(pairs)} options, {live} implemented)", ""]
        lines += [
            "| option | status | type | default | allowed | unit | description | guide § | default from |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for _, opt in pairs:
            flags = []
            if opt.session:
                flags.append("session")
            if opt.deprecated:
                flags.append("deprecated")
            desc = (
                opt.doc
                + (f" ({', '.join(flags)})" if flags else "")
                + (f" Note: {opt.note}" if opt.note else "")
            )
            lines.append(
                f"| `{opt.name}` | {_status(s, opt)} | {opt.type.kind} | {_md(opt.default_text) or '-'} | "
                f"{_md(opt.allowed)} | "
                f"{opt.unit or '-'} | {_md(desc)} | {opt.section or '-'} | {opt.default_from} |"
            )
        lines.append("")
    return "\n".join(lines)


def cmd_show(args: argparse.Namespace) -> int:
    from openum.cli import build_config

    config: Config = build_config(args)
    scopes = (args.scope,) if args.scope else SCOPES
    out = sys.stdout
    if config.files:
        out.write("# configuration files: " + ", ".join(config.files) + "\n")
    for scope in scopes:
        attrs = config.attributes(scope, context=args.context_name, topic=args.topic)
        for name, _value in attrs.items():
            opt = REGISTRY.lookup(scope, name)
            if opt.type.code_only:
                continue
            if args.changed and not attrs.is_set(name):
                continue
            text = attrs.get_str(name)
            line = f"{scope} {name} {text}".rstrip()
            if args.changed:
                line += f"  # {attrs.origin(name)}"
            out.write(line + "\n")
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    status = 0
    for path in args.files:
        try:
            config = Config(application=args.application)
            config.load_file(path)
            if args.option:
                config.set_options(args.option)
            config.check()
        except ConfigError as exc:
            status = 2
            for err in exc.errors:
                print(err.location_message() if err.source else f"{path}: {err.reason}", file=sys.stderr)
            continue
        for setting in config.unimplemented():
            text = REGISTRY.unimplemented_text(setting.scope, setting.option, setting.value)
            print(f"{setting.origin}: warning: {text} (let through by {ENV_POLICY}=warn)", file=sys.stderr)
        count = len(config.settings)
        print(f"{path}: OK ({count} flat setting(s))" if count else f"{path}: OK")
    return status
