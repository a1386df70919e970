"""Character names and logical file names: what the companion app allows, as rules.

A character name becomes a folder name, a flat file name and a URL segment of the app, so a
new name must be safe on every one of those (Windows included) and must not shadow one of
the app's routes, nor be the name of another character's storage folder
(`time_indexed_<name>`, `semantic_memory_<name>`). Historical names (`old_name`) are only
checked for path safety: they were accepted by older versions and must stay renameable.
"""

from __future__ import annotations

import re
import unicodedata

from memsvc.characters.common import STORAGE_PREFIXES
from memsvc.kernel.errors import ValidationError

MAX_NAME_UNITS = 60
ALIAS_MAX_CHARS = 100
# A file or folder name on Linux is at most 255 bytes.
MAX_FILENAME_BYTES = 255

RESERVED_ROUTE_NAMES = frozenset(
    {
        "l2d",
        "model_manager",
        "live2d_parameter_editor",
        "live2d_emotion_manager",
        "vrm_emotion_manager",
        "mmd_emotion_manager",
        "voice_clone",
        "voice_identity",
        "api_key",
        "character_card_manager",
        "cloudsave_manager",
        "memory_browser",
        "cookies_login",
        "chat",
        "subtitle",
        "agenthud",
        "toast",
        "card_maker",
        "soccer_demo",
        "badminton_demo",
        "air_basketball",
        "drawing_guess_demo",
        "watch_together",
        "jukebox",
        "static",
        "user_live2d",
        "user_live2d_local",
        "user_vrm",
        "user_mods",
        "workshop",
        "api",
        "ws",
        "health",
    }
)
DEVICE_NAMES = frozenset(
    {"CON", "PRN", "AUX", "NUL", "CLOCK$", *(f"COM{i}" for i in range(1, 10)), *(f"LPT{i}" for i in range(1, 10))}
)
ALLOWED_PUNCTUATION = frozenset(" _-()（）·・•'’")
_FILENAME = re.compile(r"recent_(.+)\.json", re.DOTALL)


def name_units(name: str) -> int:
    """Display width the app budgets: ASCII counts 1, anything else 2."""
    return sum(1 if ord(ch) < 128 else 2 for ch in name)


def _is_allowed_char(ch: str) -> bool:
    return ch in ALLOWED_PUNCTUATION or unicodedata.category(ch)[0] in "LN"


def new_name_problem(name: str) -> str | None:
    """Why `name` (already trimmed) cannot be a new character name, or None."""
    if not name:
        return "must not be empty"
    if "/" in name or "\\" in name or ".." in name:
        return "must not contain '/', '\\' or '..'"
    if name == "." or name.endswith("."):
        return "must not be '.' or end with '.'"
    if name.split(".", 1)[0].strip().upper() in DEVICE_NAMES:
        return "is a reserved Windows device name"
    if name.casefold() in RESERVED_ROUTE_NAMES:
        return "is a reserved route name"
    if name.casefold().startswith(STORAGE_PREFIXES):
        return (
            f"must not start with {' or '.join(repr(p) for p in STORAGE_PREFIXES)}: such a folder is "
            "another character's storage"
        )
    bad = next((ch for ch in name if not _is_allowed_char(ch)), None)
    if bad is not None:
        return f"may contain only letters, digits, spaces and _ - ( ) （ ） · ・ • ' ’ (not {bad!r})"
    if name_units(name) > MAX_NAME_UNITS:
        return f"must be at most {MAX_NAME_UNITS} units (ASCII counts 1, other characters 2)"
    return None


def validate_new_name(field: str, raw: str | None, *, alias: bool = False) -> str:
    """The trimmed name, or a 400 naming the rule it breaks."""
    if raw is None or not raw.strip():
        raise ValidationError.single(field, "is required")
    if alias and len(raw) > ALIAS_MAX_CHARS:
        raise ValidationError.single(field, f"must be at most {ALIAS_MAX_CHARS} characters")
    name = raw.strip()
    problem = new_name_problem(name)
    if problem:
        raise ValidationError.single(field, problem)
    return name


def validate_old_name(field: str, raw: str | None, *, alias: bool = False) -> str:
    """A historical name: dots and reserved words allowed, but never a path."""
    if raw is None or not raw.strip():
        raise ValidationError.single(field, "is required")
    if alias and len(raw) > ALIAS_MAX_CHARS:
        raise ValidationError.single(field, f"must be at most {ALIAS_MAX_CHARS} characters")
    name = raw.strip()
    if "/" in name or "\\" in name or "\x00" in name or name in (".", ".."):
        raise ValidationError.single(field, "must not contain '/', '\\' or NUL, nor be '.' or '..'")
    if len(f"recent_{name}.json".encode("utf-8", "surrogatepass")) > MAX_FILENAME_BYTES:
        raise ValidationError.single(field, "is too long for a file name")
    return name


def character_from_filename(filename: str | None) -> str:
    """`recent_<name>.json` → name; 400 for anything else (paths, `..`, other files)."""
    if not filename:
        raise ValidationError.single("filename", "is required")
    if "/" in filename or "\\" in filename or ".." in filename:
        raise ValidationError.single("filename", "must not contain '/', '\\' or '..'")
    if "\x00" in filename:
        raise ValidationError.single("filename", "must be a bare file name")
    match = _FILENAME.fullmatch(filename)
    if match is None:
        raise ValidationError.single("filename", "must look like recent_<name>.json")
    if len(filename.encode("utf-8", "surrogatepass")) > MAX_FILENAME_BYTES:
        raise ValidationError.single("filename", f"must be at most {MAX_FILENAME_BYTES} bytes (UTF-8)")
    return match.group(1)


def logical_filename(name: str) -> str:
    return f"recent_{name}.json"
