"""Frontmatter rules for skill files: the fields assistants read, and YAML that strict loaders would misread."""

import re

NAME = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
MAX_NAME = 64
MIN_DESCRIPTION, MAX_DESCRIPTION = 20, 1024
# The Agent Skills format's SKILL.md fields; loaders reject others.
SKILL_FIELDS = ("name", "description", "license", "allowed-tools", "metadata", "compatibility")
MAX_COMPATIBILITY = 500
# Plain (unquoted) YAML scalars that a strict loader reads as something other than the text written.
NON_STRING = re.compile(r"^(?:y|n|yes|no|on|off|true|false|null|~|[-+]?(?:\d[\d_]*)(?:\.\d*)?(?:e[-+]?\d+)?)$", re.I)


def frontmatter_problems(text: str, where: str, expected_name: str, skill: bool = False) -> list[str]:
    """What a strict loader would reject; `skill` adds the Agent Skills rules for a SKILL.md."""
    import yaml

    if not text.startswith("---\n") or "\n---\n" not in text[3:]:
        return [f"{where}: must start with YAML frontmatter between two '---' lines."]
    raw = text[4 : text.index("\n---\n", 3)]
    problems = []
    mapping = False  # inside a `key:` whose value is an indented mapping (metadata)
    for number, line in enumerate(raw.splitlines(), start=2):
        if mapping and line.startswith("  ") and not line[2:3].isspace():
            line = line[2:]
        else:
            mapping = False
        key, sep, value = line.partition(":")
        if sep and not value.strip() and not line[:1].isspace() and key in ("metadata",):
            mapping = True
            continue
        if not sep or line[:1].isspace() or "\t" in line:
            problems.append(f"{where}:{number}: expected a flat 'key: value' line, got {line!r}.")
            continue
        value = value.strip()
        if value[:1] in ("'", '"'):
            continue
        if ": " in value or value.endswith(":"):
            problems.append(
                f"{where}:{number}: the value of `{key}` has an unquoted ': ', which strict YAML loaders reject or "
                "read as a nested mapping. Put the value in double quotes."
            )
        elif " #" in value:
            problems.append(f"{where}:{number}: `{key}` has ' #', which YAML reads as a comment. Quote the value.")
        elif value[:1] in set("!&*[]{}|>%@`,?-#") and value[:2] not in ("- ",):
            problems.append(f"{where}:{number}: `{key}` starts with {value[0]!r}, a YAML indicator. Quote the value.")
        elif NON_STRING.match(value):
            problems.append(f"{where}:{number}: `{key}: {value}` is read as a bool, number or null. Quote it.")
    try:
        meta = yaml.safe_load(raw)
    except yaml.YAMLError as exc:
        return [*problems, f"{where}: frontmatter is not valid YAML: {exc}"]
    if not isinstance(meta, dict):
        return [*problems, f"{where}: frontmatter must be a mapping with `name` and `description`."]
    name, description = meta.get("name"), meta.get("description")
    if not isinstance(name, str) or not NAME.match(name) or len(name) > MAX_NAME:
        problems.append(
            f"{where}: `name` must be lowercase letters, digits and single hyphens, at most {MAX_NAME} characters "
            f"(got {name!r})."
        )
    elif name != expected_name:
        problems.append(f"{where}: `name` is {name!r} but must be {expected_name!r} (the file or folder name).")
    if not isinstance(description, str) or not MIN_DESCRIPTION <= len(description) <= MAX_DESCRIPTION:
        length = len(description) if isinstance(description, str) else "no text"
        problems.append(
            f"{where}: `description` must be text of {MIN_DESCRIPTION}-{MAX_DESCRIPTION} characters saying what the "
            f"skill covers and when to use it (got {length})."
        )
    elif "<" in description or ">" in description:
        problems.append(f"{where}: `description` must not contain '<' or '>' (assistants reject XML-like tags).")
    if skill:
        problems += skill_field_problems(meta, where)
        if isinstance(description, str) and not re.search(r"\bwhen\b", description, re.I):
            problems.append(f"{where}: `description` must say when to use the skill (e.g. 'Use when ...').")
    return problems


def skill_field_problems(meta: dict, where: str) -> list[str]:
    problems = []
    extra = [key for key in meta if key not in SKILL_FIELDS]
    if extra:
        problems.append(
            f"{where}: field(s) {', '.join(map(str, extra))} are not allowed in a SKILL.md; the Agent Skills format "
            f"allows {', '.join(SKILL_FIELDS)} (put anything else under `metadata`)."
        )
    metadata = meta.get("metadata")
    if metadata is not None and (
        not isinstance(metadata, dict)
        or not all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items())
    ):
        problems.append(f"{where}: `metadata` must map text keys to text values (quote numbers such as versions).")
    compatibility = meta.get("compatibility")
    if compatibility is not None and (not isinstance(compatibility, str) or len(compatibility) > MAX_COMPATIBILITY):
        problems.append(f"{where}: `compatibility` must be text of at most {MAX_COMPATIBILITY} characters.")
    return problems
