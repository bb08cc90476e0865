#!/usr/bin/env python3
"""What each library may include and link (label unit), read from the table cmake/libraries.txt.

A library's row names its folder, the libraries it uses (linked from that row by CMakeLists.txt) and the
third-party packages it links itself. The test fails, naming file:line and the rule, when
  - a source of a library includes a project file of a folder that is not its own nor of a library it uses,
    directly or through the used libraries' rows (decode/ including server/, say), or a project file outside
    every library (tests/);
  - a source includes a third-party header (PACKAGES below) of a package that neither its row nor a used
    library's row links (eval/ including <httplib.h>, core/ including LibTorch);
  - a target_link_libraries() of a library in any CMakeLists.txt names a library or package its row does not
    allow (eval/ linking PkgConfig::HTTPLIB or sinklm_serve);
  - a test executable named on the command line (those of decode/, eval/, train/) loads cpp-httplib (ldd);
  - a folder of a library holds more than MAX_FLAT_SOURCES sources flat, or has no CMakeLists.txt of its own
    (the library folder itself: it lists its sources, the root only names the libraries).
tests/ may include anything and is not read. A quoted include resolves like the compiler's (next to the
including file, then from the source root, which is the include directory); one that resolves to no project
file (a system header in quotes) is read as a third-party header.
"""
import os
import re
import subprocess
import sys

from sinklm_test import SOURCE, check, finish

TABLE = os.path.join("cmake", "libraries.txt")
# The most sources one folder of a library holds flat: a larger folder is a grab-bag to split into rooms (as
# data/, model/, eval/, serve/ are), each named in docs/ARCHITECTURE.md.
MAX_FLAT_SOURCES = 16
# Package -> (header prefixes, CMake link items). A link item or header of no package fails with a hint.
PACKAGES = {
    "yaml-cpp": (("yaml-cpp/",), ("yaml-cpp",)),
    "json": (("nlohmann/",), ("nlohmann_json::nlohmann_json",)),
    "openssl": (("openssl/",), ("OpenSSL::Crypto",)),
    "pcre2": (("pcre2.h",), ("PkgConfig::PCRE2",)),
    "sentencepiece": (("sentencepiece_",), ("PkgConfig::SENTENCEPIECE",)),
    "icu": (("unicode/",), ("ICU::uc",)),
    "zlib": (("zlib.h",), ("ZLIB::ZLIB",)),
    "zstd": (("zstd.h",), ("PkgConfig::ZSTD",)),
    "threads": ((), ("Threads::Threads",)),
    "torch": (("torch/", "ATen/", "c10/", "caffe2/"), ("${TORCH_LIBRARIES}",)),
    "openmp": ((), ('"${TORCH_OPENMP_RUNTIME}"', "${OpenMP_CXX_LIBRARIES}")),
    "mpi": (("mpi.h",), ("MPI::MPI_CXX",)),
    "nccl": (("nccl.h",), ("${NCCL_LIBRARY}",)),
    "cuda": (("cuda_runtime", "cuda.h"), ("CUDA::cudart",)),
    "httplib": (("httplib.h",), ("PkgConfig::HTTPLIB",)),
}
SOURCE_SUFFIXES = (".h", ".cpp", ".hpp", ".cc", ".cu", ".cuh")
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')
LINK = re.compile(r"target_link_libraries\(\s*(\S+)((?:[^()]|\([^()]*\))*)\)", re.S)
LINK_KEYWORDS = {"PUBLIC", "PRIVATE", "INTERFACE"}


def read_table():
    """{library: {"folder", "uses", "packages", "line"}} from cmake/libraries.txt."""
    rows = {}
    with open(os.path.join(SOURCE, TABLE), encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip() or line.startswith("#"):
                continue
            fields = line.split()
            check(len(fields) == 4, f"{TABLE}:{number}: four columns", line.strip(), quiet=True)
            library, folder, uses, packages = fields
            split = lambda column: [] if column == "-" else column.split(",")
            rows[library] = {"folder": folder, "uses": split(uses), "packages": split(packages), "line": number}
    for library, row in rows.items():
        for used in row["uses"]:
            check(used in rows, f"{TABLE}:{row['line']}: {library} uses {used}", "a library with a row", quiet=True)
        for package in row["packages"]:
            check(package in PACKAGES, f"{TABLE}:{row['line']}: {library} links {package}",
                  "a package named in tests/layering_test.py PACKAGES", quiet=True)
    return rows


def closure(rows, library):
    """The libraries `library` may reach: itself and, recursively, what its row uses."""
    seen, todo = set(), [library]
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(rows[name]["uses"])
    return seen


def sources(folder):
    found = []
    for directory, subdirs, files in os.walk(os.path.join(SOURCE, folder)):
        subdirs[:] = sorted(d for d in subdirs if not d.startswith(".") and d != "__pycache__")
        found += sorted(os.path.relpath(os.path.join(directory, name), SOURCE)
                        for name in files if name.endswith(SOURCE_SUFFIXES))
    return found


def resolve(including, target):
    """The project path (relative to SOURCE) a quoted include names, or None when it is no project file."""
    for base in (os.path.dirname(os.path.join(SOURCE, including)), SOURCE):
        path = os.path.normpath(os.path.join(base, target))
        if os.path.isfile(path):
            relative = os.path.relpath(path, SOURCE)
            return None if relative.startswith("..") else relative
    return None


def package_of_header(target):
    for package, (prefixes, _) in PACKAGES.items():
        if target.startswith(prefixes):
            return package
    return None


def include_violation(rows, library, path, bracket, target):
    """Why this include of `library`'s source breaks its row, or "" when it does not."""
    reach = closure(rows, library)
    folder = rows[library]["folder"]
    included = resolve(path, target) if bracket == '"' else None
    if included is not None:
        owner = next((name for name, row in rows.items() if included.startswith(row["folder"] + os.sep)), None)
        if owner is None:
            return f"{folder}/ includes {included}, which is in no library ({TABLE})"
        if owner not in reach:
            return (f"{folder}/ ({library}) must not include {rows[owner]['folder']}/ ({owner}): {TABLE} lets it "
                    f"use {', '.join(sorted(reach - {library})) or 'nothing'}")
        return ""
    package = package_of_header(target)
    allowed = {p for name in reach for p in rows[name]["packages"]}
    if package is not None and package not in allowed:
        return f"{folder}/ ({library}) must not include {target}: package {package} is not in its row or below ({TABLE})"
    return ""


def link_violations(rows, cmake_path, text):
    """(line, why) for every item of a library's target_link_libraries() that its row does not allow."""
    found = []
    for match in LINK.finditer(text):
        target = match.group(1)
        if target not in rows:
            continue
        line = text.count("\n", 0, match.start()) + 1
        allowed = {item for package in rows[target]["packages"] for item in PACKAGES[package][1]}
        for item in match.group(2).split():
            if item in LINK_KEYWORDS or item.startswith("#"):
                continue
            if item in rows:
                if item not in rows[target]["uses"]:
                    found.append((line, f"{target} must not link {item}: not in its row's uses ({TABLE})"))
            elif item not in allowed:
                package = next((p for p, (_, items) in PACKAGES.items() if item in items), None)
                found.append((line, f"{target} must not link {item}: " +
                              (f"package {package} is not in its row ({TABLE})" if package else
                               "no package of tests/layering_test.py PACKAGES names it")))
    return found


def cmake_files():
    found = []
    for directory, subdirs, files in os.walk(SOURCE):
        subdirs[:] = sorted(d for d in subdirs if not d.startswith(".") and d not in ("tests", "build")
                            and not d.startswith("build"))
        found += [os.path.relpath(os.path.join(directory, f), SOURCE) for f in files if f == "CMakeLists.txt"]
    return sorted(found)


def main():
    rows = read_table()
    includes = files = 0
    for library, row in rows.items():
        for path in sources(row["folder"]):
            files += 1
            with open(os.path.join(SOURCE, path), encoding="utf-8", errors="replace") as f:
                for number, line in enumerate(f, 1):
                    match = INCLUDE.match(line)
                    if not match:
                        continue
                    includes += 1
                    why = include_violation(rows, library, path, match.group(1), match.group(2).strip())
                    check(not why, f"{path}:{number}: {line.strip()}", why, quiet=True)
    check(files > 0, "the libraries' folders hold sources", SOURCE)
    for library, row in rows.items():
        check(os.path.isfile(os.path.join(SOURCE, row["folder"], "CMakeLists.txt")),
              f"{row['folder']}/CMakeLists.txt lists {library}'s sources", quiet=True)
        by_folder = {}
        for path in sources(row["folder"]):
            by_folder.setdefault(os.path.dirname(path), []).append(path)
        for folder, flat in sorted(by_folder.items()):
            check(len(flat) <= MAX_FLAT_SOURCES, f"{folder}/ holds at most {MAX_FLAT_SOURCES} sources flat",
                  f"{len(flat)}: split it into rooms", quiet=True)
    links = 0
    for path in cmake_files():
        with open(os.path.join(SOURCE, path), encoding="utf-8") as f:
            text = f.read()
        links += len(LINK.findall(text))
        for line, why in link_violations(rows, path, text):
            check(False, f"{path}:{line}: target_link_libraries", why, quiet=True)
    for binary in sys.argv[1:]:
        loaded = subprocess.run(["ldd", binary], capture_output=True, text=True).stdout
        check("httplib" not in loaded, f"{os.path.basename(binary)} loads no cpp-httplib (ldd)",
              [l.strip() for l in loaded.splitlines() if "httplib" in l], quiet=True)
    print(f"read {includes} includes in {files} files of {len(rows)} libraries, {links} target_link_libraries(), "
          f"ldd of {len(sys.argv) - 1} test executables ({TABLE})")
    finish()


if __name__ == "__main__":
    main()
