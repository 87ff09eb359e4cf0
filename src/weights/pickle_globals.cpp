#include "weights/pickle_globals.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>

namespace detforge::weights {

namespace {

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool is_identifier(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

// The data types of Python's own modules that checkpoints hold, by module.
const std::set<std::pair<std::string, std::string>>& stdlib_allowed() {
  static const std::set<std::pair<std::string, std::string>> allowed = [] {
    std::set<std::pair<std::string, std::string>> s;
    for (const char* n : {"set", "frozenset", "slice", "complex", "bytearray", "range", "object",
                          "int", "float", "str", "bytes", "bool", "tuple", "list", "dict"})
      s.emplace("builtins", n);
    for (const char* n : {"OrderedDict", "defaultdict", "Counter"}) s.emplace("collections", n);
    for (const char* n : {"_reconstructor", "__newobj__", "__newobj_ex__"}) s.emplace("copyreg", n);
    s.emplace("_codecs", "encode");
    s.emplace("types", "SimpleNamespace");
    s.emplace("argparse", "Namespace");
    for (const char* n :
         {"Path", "PosixPath", "WindowsPath", "PurePath", "PurePosixPath", "PureWindowsPath"})
      s.emplace("pathlib", n);
    for (const char* n : {"datetime", "date", "time", "timedelta", "timezone"})
      s.emplace("datetime", n);
    return s;
  }();
  return allowed;
}

bool torch_allowed(const std::string& module, const std::string& name) {
  static const std::set<std::string> top = {"Size",          "device",
                                            "dtype",         "Tensor",
                                            "strided",       "float32",
                                            "float",         "float64",
                                            "double",        "float16",
                                            "half",          "bfloat16",
                                            "int8",          "uint8",
                                            "int16",         "short",
                                            "int32",         "int",
                                            "int64",         "long",
                                            "bool",          "complex64",
                                            "complex128",    "cfloat",
                                            "cdouble",       "contiguous_format",
                                            "channels_last", "preserve_format"};
  if (module == "torch") return top.count(name) > 0 || ends_with(name, "Storage");
  if (module == "torch._utils" || module == "torch._tensor") return starts_with(name, "_rebuild_");
  if (module == "torch.serialization") return name == "_get_layout";
  if (module == "torch.jit._pickle")
    return starts_with(name, "build_") || name == "restore_type_tag";
  return starts_with(module, "torch.nn.") || starts_with(module, "torch.optim.");
}

bool numpy_allowed(const std::string& module, const std::string& name) {
  if (module == "numpy") return name == "dtype" || name == "ndarray";
  if (module == "numpy.core.multiarray" || module == "numpy._core.multiarray")
    return name == "_reconstruct" || name == "scalar";
  if (module == "numpy.core.numeric" || module == "numpy._core.numeric")
    return name == "_frombuffer";
  return module == "numpy.dtypes" && ends_with(name, "DType");
}

}  // namespace

std::string python3_module(const std::string& module) {
  // _compat_pickle.IMPORT_MAPPING: what Python 3's pickle imports for a Python 2 module name
  // (protocol 2 files, as torch.save writes, name builtins `__builtin__`).
  static const std::map<std::string, std::string> renames = {
      {"BaseHTTPServer", "http.server"},
      {"CGIHTTPServer", "http.server"},
      {"ConfigParser", "configparser"},
      {"Cookie", "http.cookies"},
      {"Dialog", "tkinter.dialog"},
      {"DocXMLRPCServer", "xmlrpc.server"},
      {"FileDialog", "tkinter.filedialog"},
      {"HTMLParser", "html.parser"},
      {"Queue", "queue"},
      {"ScrolledText", "tkinter.scrolledtext"},
      {"SimpleDialog", "tkinter.simpledialog"},
      {"SimpleHTTPServer", "http.server"},
      {"SimpleXMLRPCServer", "xmlrpc.server"},
      {"SocketServer", "socketserver"},
      {"StringIO", "io"},
      {"Tix", "tkinter.tix"},
      {"Tkconstants", "tkinter.constants"},
      {"Tkdnd", "tkinter.dnd"},
      {"Tkinter", "tkinter"},
      {"UserDict", "collections"},
      {"UserList", "collections"},
      {"UserString", "collections"},
      {"__builtin__", "builtins"},
      {"_abcoll", "collections.abc"},
      {"_elementtree", "xml.etree.ElementTree"},
      {"_winreg", "winreg"},
      {"anydbm", "dbm"},
      {"cPickle", "pickle"},
      {"cStringIO", "io"},
      {"commands", "subprocess"},
      {"cookielib", "http.cookiejar"},
      {"copy_reg", "copyreg"},
      {"dbhash", "dbm.bsd"},
      {"dbm", "dbm.ndbm"},
      {"dumbdbm", "dbm.dumb"},
      {"dummy_thread", "_dummy_thread"},
      {"gdbm", "dbm.gnu"},
      {"htmlentitydefs", "html.entities"},
      {"httplib", "http.client"},
      {"markupbase", "_markupbase"},
      {"repr", "reprlib"},
      {"robotparser", "urllib.robotparser"},
      {"test.test_support", "test.support"},
      {"thread", "_thread"},
      {"tkColorChooser", "tkinter.colorchooser"},
      {"tkCommonDialog", "tkinter.commondialog"},
      {"tkFileDialog", "tkinter.filedialog"},
      {"tkFont", "tkinter.font"},
      {"tkMessageBox", "tkinter.messagebox"},
      {"tkSimpleDialog", "tkinter.simpledialog"},
      {"ttk", "tkinter.ttk"},
      {"urllib2", "urllib.request"},
      {"urlparse", "urllib.parse"},
      {"whichdb", "dbm"},
      {"xmlrpclib", "xmlrpc.client"},
  };
  const auto it = renames.find(module);
  return it == renames.end() ? module : it->second;
}

const std::vector<std::string>& python_stdlib_roots() {
  // sys.stdlib_module_names of Python 3.11 and the roots of _compat_pickle's IMPORT_MAPPING and
  // NAME_MAPPING (the Python 2 names pickle maps onto Python 3's).
  static const std::vector<std::string> roots = {
      "BaseHTTPServer",
      "CGIHTTPServer",
      "ConfigParser",
      "Cookie",
      "Dialog",
      "DocXMLRPCServer",
      "FileDialog",
      "HTMLParser",
      "Queue",
      "ScrolledText",
      "SimpleDialog",
      "SimpleHTTPServer",
      "SimpleXMLRPCServer",
      "SocketServer",
      "StringIO",
      "Tix",
      "Tkconstants",
      "Tkdnd",
      "Tkinter",
      "UserDict",
      "UserList",
      "UserString",
      "__builtin__",
      "__future__",
      "_abc",
      "_abcoll",
      "_aix_support",
      "_ast",
      "_asyncio",
      "_bisect",
      "_blake2",
      "_bootsubprocess",
      "_bz2",
      "_codecs",
      "_codecs_cn",
      "_codecs_hk",
      "_codecs_iso2022",
      "_codecs_jp",
      "_codecs_kr",
      "_codecs_tw",
      "_collections",
      "_collections_abc",
      "_compat_pickle",
      "_compression",
      "_contextvars",
      "_crypt",
      "_csv",
      "_ctypes",
      "_curses",
      "_curses_panel",
      "_datetime",
      "_dbm",
      "_decimal",
      "_elementtree",
      "_frozen_importlib",
      "_frozen_importlib_external",
      "_functools",
      "_gdbm",
      "_hashlib",
      "_heapq",
      "_imp",
      "_io",
      "_json",
      "_locale",
      "_lsprof",
      "_lzma",
      "_markupbase",
      "_md5",
      "_msi",
      "_multibytecodec",
      "_multiprocessing",
      "_opcode",
      "_operator",
      "_osx_support",
      "_overlapped",
      "_pickle",
      "_posixshmem",
      "_posixsubprocess",
      "_py_abc",
      "_pydecimal",
      "_pyio",
      "_queue",
      "_random",
      "_scproxy",
      "_sha1",
      "_sha256",
      "_sha3",
      "_sha512",
      "_signal",
      "_sitebuiltins",
      "_socket",
      "_sqlite3",
      "_sre",
      "_ssl",
      "_stat",
      "_statistics",
      "_string",
      "_strptime",
      "_struct",
      "_symtable",
      "_thread",
      "_threading_local",
      "_tkinter",
      "_tokenize",
      "_tracemalloc",
      "_typing",
      "_uuid",
      "_warnings",
      "_weakref",
      "_weakrefset",
      "_winapi",
      "_winreg",
      "_zoneinfo",
      "abc",
      "aifc",
      "antigravity",
      "anydbm",
      "argparse",
      "array",
      "ast",
      "asynchat",
      "asyncio",
      "asyncore",
      "atexit",
      "audioop",
      "base64",
      "bdb",
      "binascii",
      "bisect",
      "builtins",
      "bz2",
      "cPickle",
      "cProfile",
      "cStringIO",
      "calendar",
      "cgi",
      "cgitb",
      "chunk",
      "cmath",
      "cmd",
      "code",
      "codecs",
      "codeop",
      "collections",
      "colorsys",
      "commands",
      "compileall",
      "concurrent",
      "configparser",
      "contextlib",
      "contextvars",
      "cookielib",
      "copy",
      "copy_reg",
      "copyreg",
      "crypt",
      "csv",
      "ctypes",
      "curses",
      "dataclasses",
      "datetime",
      "dbhash",
      "dbm",
      "decimal",
      "difflib",
      "dis",
      "distutils",
      "doctest",
      "dumbdbm",
      "dummy_thread",
      "email",
      "encodings",
      "ensurepip",
      "enum",
      "errno",
      "exceptions",
      "faulthandler",
      "fcntl",
      "filecmp",
      "fileinput",
      "fnmatch",
      "fractions",
      "ftplib",
      "functools",
      "gc",
      "gdbm",
      "genericpath",
      "getopt",
      "getpass",
      "gettext",
      "glob",
      "graphlib",
      "grp",
      "gzip",
      "hashlib",
      "heapq",
      "hmac",
      "html",
      "htmlentitydefs",
      "http",
      "httplib",
      "idlelib",
      "imaplib",
      "imghdr",
      "imp",
      "importlib",
      "inspect",
      "io",
      "ipaddress",
      "itertools",
      "json",
      "keyword",
      "lib2to3",
      "linecache",
      "locale",
      "logging",
      "lzma",
      "mailbox",
      "mailcap",
      "markupbase",
      "marshal",
      "math",
      "mimetypes",
      "mmap",
      "modulefinder",
      "msilib",
      "msvcrt",
      "multiprocessing",
      "netrc",
      "nis",
      "nntplib",
      "nt",
      "ntpath",
      "nturl2path",
      "numbers",
      "opcode",
      "operator",
      "optparse",
      "os",
      "ossaudiodev",
      "pathlib",
      "pdb",
      "pickle",
      "pickletools",
      "pipes",
      "pkgutil",
      "platform",
      "plistlib",
      "poplib",
      "posix",
      "posixpath",
      "pprint",
      "profile",
      "pstats",
      "pty",
      "pwd",
      "py_compile",
      "pyclbr",
      "pydoc",
      "pydoc_data",
      "pyexpat",
      "queue",
      "quopri",
      "random",
      "re",
      "readline",
      "repr",
      "reprlib",
      "resource",
      "rlcompleter",
      "robotparser",
      "runpy",
      "sched",
      "secrets",
      "select",
      "selectors",
      "shelve",
      "shlex",
      "shutil",
      "signal",
      "site",
      "smtpd",
      "smtplib",
      "sndhdr",
      "socket",
      "socketserver",
      "spwd",
      "sqlite3",
      "sre_compile",
      "sre_constants",
      "sre_parse",
      "ssl",
      "stat",
      "statistics",
      "string",
      "stringprep",
      "struct",
      "subprocess",
      "sunau",
      "symtable",
      "sys",
      "sysconfig",
      "syslog",
      "tabnanny",
      "tarfile",
      "telnetlib",
      "tempfile",
      "termios",
      "test",
      "textwrap",
      "this",
      "thread",
      "threading",
      "time",
      "timeit",
      "tkColorChooser",
      "tkCommonDialog",
      "tkFileDialog",
      "tkFont",
      "tkMessageBox",
      "tkSimpleDialog",
      "tkinter",
      "token",
      "tokenize",
      "tomllib",
      "trace",
      "traceback",
      "tracemalloc",
      "ttk",
      "tty",
      "turtle",
      "turtledemo",
      "types",
      "typing",
      "unicodedata",
      "unittest",
      "urllib",
      "urllib2",
      "urlparse",
      "uu",
      "uuid",
      "venv",
      "warnings",
      "wave",
      "weakref",
      "webbrowser",
      "whichdb",
      "winreg",
      "winsound",
      "wsgiref",
      "xdrlib",
      "xml",
      "xmlrpc",
      "xmlrpclib",
      "zipapp",
      "zipfile",
      "zipimport",
      "zlib",
      "zoneinfo",
  };
  return roots;
}

std::optional<std::string> refused_global(const std::string& module, const std::string& name) {
  const std::string root = module.substr(0, module.find('.'));
  const auto& stdlib = python_stdlib_roots();
  if (std::binary_search(stdlib.begin(), stdlib.end(), root)) {
    if (stdlib_allowed().count({module, name})) return std::nullopt;
    return std::string("it is Python's own ") + module +
           " module, which weight files use only for a few data types";
  }
  if (root == "torch") {
    if (torch_allowed(module, name)) return std::nullopt;
    return std::string(
        "torch names in weight files are storages, dtypes, rebuild functions, "
        "torch.nn and torch.optim classes");
  }
  if (root == "numpy") {
    if (numpy_allowed(module, name)) return std::nullopt;
    return std::string("numpy names in weight files are array and scalar reconstructors");
  }
  if (!is_identifier(name)) return std::string("it is an attribute path, not a name");
  if (starts_with(name, "__")) return std::string("it is a dunder name");
  return std::nullopt;
}

}  // namespace detforge::weights
