"""Frontmatter rules for skill files: the fields assistants read, and YAML that strict loaders would misread."""

import re

NAME = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
MAX_NAME = 64
MIN_DESCRIPTION, MAX_DESCRIPTION = 20, 1024
# Plain (unquoted) YAML scalars that a strict loader reads as something other than the text written.
NON_STRING = re.compile(r"^(?:y|n|yes|no|on|off|true|false|null|~|[-+]?(?:\d[\d_]*)(?:\.\d*)?(?:e[-+]?\d+)?)$", re.I)


def frontmatter_problems(text: str, where: str, expected_name: str) -> list[str]:
    import yaml

    if not text.startswith("---\n") or "\n---\n" not in text[3:]:
        return [f"{where}: must start with YAML frontmatter between two '---' lines."]
    raw = text[4 : text.index("\n---\n", 3)]
    problems = []
    for number, line in enumerate(raw.splitlines(), start=2):
        key, sep, value = line.partition(":")
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
    return problems
