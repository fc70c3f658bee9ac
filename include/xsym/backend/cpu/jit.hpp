#ifndef XSYM_BACKEND_CPU_JIT_HPP
#define XSYM_BACKEND_CPU_JIT_HPP

// Fused elementwise programs compiled to machine code, Theano's C linker for Composites: with
// the flag cxx set (cxx=g++), a function's fused programs become one C++ file of loops, each
// computing a whole program per SIMD batch with every intermediate in registers. cxx compiles
// it into a shared library in compiledir, which is kept: a later build of the same programs,
// in this process or another, loads it without compiling.
//
// The generated code applies the ops' own expressions (the op table's expressions, XSYM_KERNEL_HELPERS in
// vector_math.hpp), as text, so it computes what the interpreted steps compute; only the
// compiler's freedom to contract a * b + c into one fused multiply-add differs.

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#if __has_include(<dlfcn.h>) && __has_include(<spawn.h>) && __has_include(<sys/wait.h>)
#include <dlfcn.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>
#define XSYM_JIT_AVAILABLE 1
#else
#define XSYM_JIT_AVAILABLE 0
#endif

#include "../../config/cold.hpp"
#include "../../config/config.hpp"
#include "elemwise.hpp"

#if XSYM_JIT_AVAILABLE
extern char** environ;
#endif

XSYM_COLD_BEGIN  // code generation and compiling run when a function is built

namespace xsym::cpu {

/// @brief A fused program could not be compiled or loaded; what() names the flag, the command
/// or the file involved.
class jit_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// @brief How to compile: the flags cxx, gcc.cxxflags and compiledir.
struct jit_settings {
  std::string cxx;         // the compiler; empty: nothing is compiled
  std::string cxxflags;    // whitespace-separated, after xsym's own (-std=c++20 -fPIC -shared)
  std::string compiledir;  // empty: the flag's default
};

/// @brief One program to compile, and the inputs that are one value (bit r: input r) in each of
/// its two kernels: the whole-array case (inputs that broadcast in every dimension) and the
/// row-by-row case (inputs that broadcast along the last dimension).
struct jit_request {
  compiled_program* program;
  std::uint64_t scalar_bits[2];
  bool block = false;  // a OnePassGemv's g alone, for its blocks of rows (counted apart)
};

/// @brief What the last jit_compile did, for tests and the profile.
struct jit_stats {
  int kernels = 0;         // programs given compiled kernels
  int row_kernels = 0;     // of them, those with a second kernel for row-by-row spans
  int block_kernels = 0;   // OnePassGemv's g alone (one per node), not in `kernels`
  int compiled = 0;        // modules cxx compiled (0: loaded from compiledir or this process)
  std::string library;     // the shared library's path
};

namespace detail {

inline std::uint64_t fnv1a(std::string_view s, std::uint64_t h = 14695981039346656037ull) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

// The C++ spelling of a register.
inline std::string reg_name(int r) { return "r" + std::to_string(r); }

inline const char* shared_kernel_text(int shared) {
  switch (static_cast<shared_exp_kernel>(shared)) {
    case shared_exp_kernel::exp_neg_abs: return "exp_neg_abs_fn::apply";
    case shared_exp_kernel::sigmoid_from_exp: return "sigmoid_from_exp_fn::apply";
    case shared_exp_kernel::softplus_from_log1p: return "softplus_from_log1p_fn::apply";
    case shared_exp_kernel::recip_1p: return "recip_1p_fn::apply";
    case shared_exp_kernel::sigmoid_from_recip: return "sigmoid_from_recip_fn::apply";
  }
  return nullptr;
}

/// The body of one program's loop, for batches (V = "B") or scalars (V = "T"); empty when a
/// step is not one the generator handles (then the program keeps its interpreted steps).
inline std::string jit_body(const compiled_program& cp, const char* V) {
  const program& p = *cp.prog;
  const dtype t = cp.reg_types[0];
  std::ostringstream os;
  std::vector<char> defined(cp.reg_types.size(), 0), is_bool(cp.reg_types.size(), 0);
  for (int r = 0; r < p.n_inputs; ++r) defined[static_cast<std::size_t>(r)] = 1;
  auto arg = [&](int r) -> std::string {
    if (r < 0 || static_cast<std::size_t>(r) >= defined.size() || !defined[static_cast<std::size_t>(r)] ||
        is_bool[static_cast<std::size_t>(r)])
      return {};
    return reg_name(r);
  };
  for (const compiled_step& st : cp.steps) {
    const auto d = static_cast<std::size_t>(st.dst);
    if (st.dst < p.n_inputs || defined[d]) return {};  // single assignment only
    std::string a[max_chain_links + 1];
    for (int j = 0; j < st.arity; ++j)
      if ((a[j] = arg(st.args[j])).empty()) return {};
    if (st.chain) {
      // acc = arg 0, then acc = acc OP b, b OP acc or OP(acc), as detail::chain does.
      if (cp.reg_types[d] != t) return {};
      const std::string acc = reg_name(st.dst);
      os << "    " << V << " " << acc << " = " << a[0] << ";\n";
      for (int k = 0, j = 1; k < st.links; ++k) {
        const unsigned code = chain_link_code(st.chain_codes, k);
        os << "    " << acc << " = ";
        if (code >= first_unary_link) {
          os << "f_" << info(chain_unary_ops[code - first_unary_link]).name << "(" << acc << ", " << acc << ");\n";
          continue;
        }
        static constexpr const char* ops[] = {"+", "-", "*", "/"};
        const std::string& b = a[j++];
        os << ((code & link_reversed) ? b + " " + ops[code & 3u] + " " + acc : acc + " " + ops[code & 3u] + " " + b) << ";\n";
      }
    } else if (info(st.op).comparison && st.shared < 0) {
      if (cp.reg_types[d] != dtype::bool_) return {};
      os << "    const auto " << reg_name(st.dst) << " = f_" << info(st.op).name << "(" << a[0] << ", " << a[1] << ");\n";
      is_bool[d] = 1;
    } else {
      if (cp.reg_types[d] != t) return {};
      const char* f = st.shared >= 0 ? shared_kernel_text(st.shared) : op_expression_text(st.op);
      if (!f || st.arity < 1 || st.arity > (st.shared >= 0 ? 3 : 2)) return {};
      const std::string call = st.shared >= 0 ? std::string(f) : "f_" + std::string(info(st.op).name);
      os << "    const " << V << " " << reg_name(st.dst) << " = " << call << "(" << a[0] << ", "
         << a[st.arity > 1 ? 1 : 0] << (st.arity > 2 ? ", " + a[2] : std::string()) << ");\n";
    }
    defined[d] = 1;
  }
  // A comparison's result may only be an output: the bool registers' only reader is the store.
  for (const compiled_step& st : cp.steps)
    for (int j = 0; j < st.arity; ++j)
      if (is_bool[static_cast<std::size_t>(st.args[j])]) return {};
  for (int r : p.outputs)
    if (!defined[static_cast<std::size_t>(r)]) return {};
  return os.str();
}

/// One program as an extern "C" function `name`, or "" when the generator does not handle it:
/// every register float32 (or every one float64) but comparison results, which are outputs.
/// With `direct`, and one output of the float type, also `name`_direct (a jit_direct_fn).
inline std::string jit_kernel_source(const compiled_program& cp, std::uint64_t scalar_bits, const std::string& name,
                                     bool direct = false) {
  const program& p = *cp.prog;
  if (p.n_inputs < 1 || p.n_inputs > 64 || cp.steps.empty()) return {};
  const dtype t = cp.reg_types[0];
  if (t != dtype::float32 && t != dtype::float64) return {};
  for (int r = 0; r < p.n_inputs; ++r)
    if (cp.reg_types[static_cast<std::size_t>(r)] != t) return {};
  const std::string simd = jit_body(cp, "B");
  if (simd.empty()) return {};
  auto is_bool = [&](std::size_t o) { return cp.reg_types[static_cast<std::size_t>(p.outputs[o])] == dtype::bool_; };
  std::ostringstream os;
  // The loops in a function of this file's own, which both entries inline: an extern "C"
  // function of a -fPIC library may be interposed, so the compiler would not inline it.
  os << "[[gnu::always_inline]] static inline void " << name
     << "_run(const std::byte* const* in, std::byte* const* out, std::int64_t n, bool stream) {\n";
  os << "  using T = " << (t == dtype::float32 ? "float" : "double") << ";\n";
  os << "  using B = xsimd::batch<T>;\n  constexpr std::int64_t w = static_cast<std::int64_t>(B::size);\n";
  for (int r = 0; r < p.n_inputs; ++r) {
    os << "  const T* p" << r << " = reinterpret_cast<const T*>(in[" << r << "]);\n";
    if ((scalar_bits >> r) & 1u) os << "  const B b" << r << "(p" << r << "[0]);\n";
  }
  int first_float = -1;
  for (std::size_t o = 0; o < p.outputs.size(); ++o) {
    const char* type = is_bool(o) ? "bool" : "T";
    os << "  " << type << "* q" << o << " = reinterpret_cast<" << type << "*>(out[" << o << "]);\n";
    if (!is_bool(o) && first_float < 0) first_float = static_cast<int>(o);
  }
  // Every input of an element is read before any output of it is written: an output may share
  // an input's buffer (in place).
  auto loop = [&](bool nt) {
    for (int r = 0; r < p.n_inputs; ++r) {
      if ((scalar_bits >> r) & 1u) os << "    const B " << reg_name(r) << " = b" << r << ";\n";
      else os << "    const B " << reg_name(r) << " = B::load_unaligned(p" << r << " + i);\n";
    }
    os << simd;
    for (std::size_t o = 0; o < p.outputs.size(); ++o) {
      const std::string v = reg_name(p.outputs[o]);
      if (nt && !is_bool(o)) os << "    nt_store(" << v << ", q" << o << " + i);\n";
      else os << "    " << v << ".store_unaligned(q" << o << " + i);\n";
    }
  };
  // A span's first or last elements short of a batch: one batch over copies of them, the other
  // lanes repeating the last (tail_batch), as the interpreter's kernels take their tails.
  auto padded = [&](const char* count) {
    os << "    {\n      const std::int64_t tail_n = " << count << ";\n";
    for (int r = 0; r < p.n_inputs; ++r) {
      if ((scalar_bits >> r) & 1u) {
        os << "      const B " << reg_name(r) << " = b" << r << ";\n";
        continue;
      }
      os << "      alignas(64) T c" << r << "[w];\n      const B " << reg_name(r) << " = tail_batch<B>(p" << r
         << " + i, tail_n, c" << r << ");\n";
    }
    os << simd;
    for (std::size_t o = 0; o < p.outputs.size(); ++o) {
      os << "      alignas(64) " << (is_bool(o) ? "bool" : "T") << " o" << o << "[w];\n      "
         << reg_name(p.outputs[o]) << ".store_unaligned(o" << o << ");\n";
      os << "      for (std::int64_t j = 0; j < tail_n; ++j) q" << o << "[i + j] = o" << o << "[j];\n";
    }
    os << "      i += tail_n;\n    }\n";
  };
  os << "  std::int64_t i = 0;\n";
  if (first_float >= 0) {
    // Arrays larger than the cache (`stream`, see streaming_min_bytes): outputs leave with
    // non-temporal stores, which need aligned addresses, so the first elements up to a cache
    // line run first (stored normally, the last batch over copies); only when every float
    // output sits at the same offset.
    os << "  const auto line = [](const void* q) { return reinterpret_cast<std::uintptr_t>(q) % 64; };\n";
    os << "  bool nt = stream && line(q" << first_float << ") % sizeof(T) == 0";
    for (std::size_t o = 0; o < p.outputs.size(); ++o)
      if (!is_bool(o) && static_cast<int>(o) != first_float) os << " && line(q" << o << ") == line(q" << first_float << ")";
    os << ";\n  if (nt) {\n";
    os << "    const std::int64_t head = std::min<std::int64_t>(n, (64 - line(q" << first_float << ")) % 64 / sizeof(T));\n";
    // The head is up to a line less one element: with batches narrower than a line (AVX2's
    // 8 floats), whole batches first, stored normally, then one padded batch.
    os << "    for (; i + w <= head; i += w) {\n";
    loop(false);
    os << "    }\n    if (i < head)\n";
    padded("head - i");
    os << "    for (; i + w <= n; i += w) {\n";
    loop(true);
    os << "    }\n    stream_fence();\n  }\n";
  }
  // Four batches an iteration, as typed_loop: one a time, each store stalled the next loads
  // on AVX2 (cxx's add3mul over 1000 floats took twice the typed kernel's time).
  os << "  for (; i + 4 * w <= n;) {\n";
  for (int u = 0; u < 4; ++u) {
    os << "   {\n";
    loop(false);
    os << "   }\n    i += w;\n";
  }
  os << "  }\n";
  os << "  for (; i + w <= n; i += w) {\n";
  loop(false);
  os << "  }\n  if (i < n)\n";
  padded("n - i");
  os << "}\n";
  os << "extern \"C\" void " << name << "(const std::byte* const* in, std::byte* const* out, std::int64_t n, bool stream) {\n"
     << "  " << name << "_run(in, out, n, stream);\n}\n";
  if (direct && p.outputs.size() == 1 && !is_bool(0)) {
    // run_direct_step's checks, unrolled: an input (a constant aside) that shares a byte with
    // the destination sends the call through the loop.
    os << "extern \"C\" bool " << name
       << "_direct(const int* arg, const std::byte* const* constant, const std::byte* const* args, std::byte* out, "
          "std::int64_t n) {\n";
    os << "  using T = " << (t == dtype::float32 ? "float" : "double") << ";\n";
    os << "  const auto lo = reinterpret_cast<std::intptr_t>(out);\n"
          "  const std::intptr_t hi = lo + n * static_cast<std::intptr_t>(sizeof(T));\n"
          "  const auto beside = [lo, hi](const std::byte* p, std::intptr_t bytes) {\n"
          "    const auto a = reinterpret_cast<std::intptr_t>(p);\n"
          "    return a < hi && lo < a + bytes;\n"
          "  };\n";
    os << "  const std::byte* in[" << p.n_inputs << "];\n";
    for (int r = 0; r < p.n_inputs; ++r) {
      const char* bytes = (scalar_bits >> r) & 1u ? "static_cast<std::intptr_t>(sizeof(T))"
                                                  : "n * static_cast<std::intptr_t>(sizeof(T))";
      os << "  in[" << r << "] = arg[" << r << "] < 0 ? constant[" << r << "] : args[arg[" << r << "]];\n";
      os << "  if (arg[" << r << "] >= 0 && beside(in[" << r << "], " << bytes << ")) return false;\n";
    }
    os << "  std::byte* const o[1] = {out};\n  " << name << "_run(in, o, n, false);\n  return true;\n}\n";
  }
  return os.str();
}

inline std::string jit_prelude() {
  // A library's name is a hash of this text (and of the command), so a change to what is
  // generated never loads a library made from older text.
  std::string s = "// Generated by xsym: fused elementwise programs, one function each. See xsym/backend/cpu/jit.hpp.\n"
                  "#include <algorithm>\n#include <cmath>\n#include <cstddef>\n#include <cstdint>\n#include <limits>\n#include <type_traits>\n"
                  "#if defined(__x86_64__) || defined(__i386__)\n#include <immintrin.h>\n#endif\n"
                  "#include <xsimd/xsimd.hpp>\n\n"
                  "namespace {\n";
  s += vlanes_text;
  s += "\n";
  s += vexp_generic_text;
  s += "\n";
  s += vlog_generic_text;
  s += "\n#if defined(__AVX512F__)\n";
  s += vexp_avx512_text;
  s += "\n";
  s += vlog_avx512_text;
  s += "\n#endif\n";
  s += kernel_helpers_text;
  s += "\n#if defined(__SSE2__)\n";
  s += nt_store_text;
  s += "\n#else\n";
  s += nt_store_fallback_text;
  s += "\n#endif\n";
  for (int k = 0; k < scalar_op_count; ++k) {
    const auto op = static_cast<scalar_op>(k);
    // Always inlined: GCC kept AVX2's float log out of line, a call per batch across which
    // every vector register dies.
    if (const char* e = op_expression_text(op))
      s += "template <class X> [[gnu::always_inline]] inline " + std::string(info(op).comparison ? "auto" : "X") +
           " f_" + std::string(info(op).name) +
           "([[maybe_unused]] X a, [[maybe_unused]] X b) { return " + e + "; }\n";
  }
  s += "}  // namespace\n\n";
  return s;
}

inline std::vector<std::string> split_words(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream is(s);
  for (std::string w; is >> w;) out.push_back(w);
  return out;
}

// A library compiled with -march=native runs only where it was compiled: the key includes the
// CPU's model and feature list, so a compiledir shared between machines (an NFS home) holds one
// library per kind of machine.
inline const std::string& cpu_identity() {
  static const std::string id = [] {
    std::ifstream in("/proc/cpuinfo");
    std::string line, model, flags;
    while ((model.empty() || flags.empty()) && std::getline(in, line)) {
      if (model.empty() && line.starts_with("model name")) model = line;
      if (flags.empty() && line.starts_with("flags")) flags = line;
    }
    return model + "\n" + flags;
  }();
  return id;
}

inline std::string read_text(const std::filesystem::path& p, std::size_t max_bytes) {
  std::ifstream in(p, std::ios::binary);
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (s.size() > max_bytes) s = s.substr(0, max_bytes) + "\n[...]";
  return s;
}

struct loaded_module {
  void* handle = nullptr;
  std::string path;
};

// A library's size and hash, "<bytes> <fnv1a hex>": written beside it (.sum) before it takes its
// name, and compared before it is loaded, since dlopen of a truncated file faults (SIGBUS) and
// of a damaged one runs whatever its bytes are. Empty where the file cannot be read.
inline std::string file_digest(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return "";
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(fnv1a(bytes)));
  return std::to_string(bytes.size()) + " " + hex;
}

// Libraries loaded by this process, by key: never unloaded, functions may hold their kernels.
inline std::map<std::uint64_t, loaded_module>& loaded_modules() {
  static std::map<std::uint64_t, loaded_module> m;
  return m;
}
inline std::mutex& jit_mutex() {
  static std::mutex m;
  return m;
}

#if XSYM_JIT_AVAILABLE
// Runs argv without a shell; its stdout and stderr go to `log`. Returns the exit status (minus
// the signal's number where a signal ended it), or
// throws when the program could not be started.
inline int run_compiler(const std::vector<std::string>& argv, const std::filesystem::path& log, const std::string& flag) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  pid_t pid = 0;
  const int err = posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (err != 0)
    throw jit_error("xsym: cxx=" + flag + ": cannot run the compiler '" + argv[0] + "' (" + std::strerror(err) +
                    "); set cxx to a C++20 compiler such as g++, or to an empty value to run fused kernels "
                    "without compiling them");
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) throw jit_error(std::string("xsym: waiting for the compiler: ") + std::strerror(errno));
  return WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? -WTERMSIG(status) : 1;
}
#endif

// The module for `source`: from this process, else from compiledir, else compiled now.
inline loaded_module load_module(const std::string& source, const jit_settings& s, jit_stats& stats) {
#if !XSYM_JIT_AVAILABLE
  (void)source;
  (void)stats;
  throw jit_error("xsym: cxx=" + s.cxx + ": compiling kernels needs dlopen and posix_spawn, which this platform lacks; "
                  "set cxx to an empty value");
#else
  namespace fs = std::filesystem;
  std::vector<std::string> argv{s.cxx, "-std=c++20", "-fPIC", "-shared"};
  for (auto& w : split_words(s.cxxflags)) argv.push_back(std::move(w));
  argv.push_back("-ffp-contract=off");  // last: a product and a sum stay two roundings, as interpreted
  std::string command;
  for (const auto& a : argv) command += a + " ";
  const std::uint64_t key = fnv1a(cpu_identity(), fnv1a(command, fnv1a(source)));
  auto& mods = loaded_modules();
  if (auto it = mods.find(key); it != mods.end()) return it->second;

  const fs::path dir = s.compiledir.empty() ? fs::path(xsym::detail::default_compiledir()) : fs::path(s.compiledir);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir))
    throw jit_error("xsym: compiledir=" + dir.string() + ": cannot create the directory (" +
                    (ec ? ec.message() : std::string("a file of that name exists")) +
                    "); set compiledir to a writable directory");
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(key));
  const fs::path lib = dir / ("xsym_" + std::string(hex) + ".so");
  const fs::path src = dir / ("xsym_" + std::string(hex) + ".cpp");
  const fs::path sum = dir / ("xsym_" + std::string(hex) + ".sum");
  // Each library names its key: a file at the name that was built from other text (a copied
  // or damaged compiledir, a hash collision) is not run, but built again.
  const std::string key_symbol = "xsym_module_key";
  auto open_checked = [&](const fs::path& path) -> void* {
    void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) return nullptr;
    const auto* k = static_cast<const unsigned long long*>(dlsym(h, key_symbol.c_str()));
    if (k && *k == key) return h;
    dlclose(h);
    return nullptr;
  };
  // Only a library whose bytes are those its .sum records is loaded; any other is built again.
  const bool intact = fs::exists(lib) && [&] {
    const std::string want = read_text(sum, 64), got = file_digest(lib);
    return !got.empty() && want == got + "\n";
  }();
  void* handle = intact ? open_checked(lib) : nullptr;
  if (!handle) {
    // Other processes may compile the same module at once: each writes its own files and
    // renames the library into place, which is atomic, once it loads.
    const std::string tag = std::to_string(static_cast<long>(getpid()));
    const fs::path tmp_src = dir / ("xsym_" + std::string(hex) + "." + tag + ".cpp");
    const fs::path tmp_lib = dir / ("xsym_" + std::string(hex) + "." + tag + ".so");
    const fs::path log = dir / ("xsym_" + std::string(hex) + "." + tag + ".log");
    const fs::path tmp_sum = dir / ("xsym_" + std::string(hex) + "." + tag + ".sum");
    auto clean = [&] {
      fs::remove(tmp_src, ec);
      fs::remove(tmp_lib, ec);
      fs::remove(log, ec);
      fs::remove(tmp_sum, ec);
    };
    {
      std::ofstream out(tmp_src, std::ios::binary);
      out << source << "extern \"C\" const unsigned long long " << key_symbol << " = 0x" << hex << "ULL;\n";
      if (!out) {
        clean();
        throw jit_error("xsym: compiledir=" + dir.string() + ": cannot write " + tmp_src.string() +
                        "; set compiledir to a writable directory");
      }
    }
    std::vector<std::string> full = argv;
    full.insert(full.end(), {"-o", tmp_lib.string(), tmp_src.string()});
    std::string cmd;
    for (const auto& a : full) cmd += (cmd.empty() ? "" : " ") + (a == tmp_src.string() ? src.string() : a);
    int rc = 0;
    try {
      rc = run_compiler(full, log, s.cxx);
    } catch (...) {
      clean();
      throw;
    }
    const std::string advice = "\n(check cxx and gcc.cxxflags, or set cxx to an empty value to run fused kernels "
                               "without compiling them)";
    if (rc != 0) {
      fs::rename(tmp_src, src, ec);  // kept, and named in the message, for a look at what failed
      const std::string out = read_text(log, 4000);
      clean();
      const std::string how = rc > 0 ? "exit status " + std::to_string(rc)
                                     : "killed by signal " + std::to_string(-rc) + ", " + strsignal(-rc);
      throw jit_error("xsym: cxx=" + s.cxx + " failed (" + how + ") compiling " +
                      src.string() + "\n  command: " + cmd + "\n  compiler output:\n" + out + advice);
    }
    // Loaded before it takes the library's name, so that what cannot load is never cached.
    handle = fs::exists(tmp_lib) ? open_checked(tmp_lib) : nullptr;
    if (!handle) {
      const char* why = dlerror();
      const std::string out = read_text(log, 4000);
      const std::string what = !fs::exists(tmp_lib) ? "wrote no library"
                               : "wrote a library that does not load (" + std::string(why ? why : "no " + key_symbol) + ")";
      clean();
      throw jit_error("xsym: cxx=" + s.cxx + " exited 0 but " + what + "\n  command: " + cmd +
                      "\n  compiler output:\n" + out + advice);
    }
    fs::remove(log, ec);
    fs::rename(tmp_src, src, ec);
    {
      std::ofstream out(tmp_sum, std::ios::binary);
      out << file_digest(tmp_lib) << "\n";
    }
    // The digest first: a library found under its name has one (another process's, for the
    // same text, may differ in bytes; the library is then built again, never run unchecked).
    fs::rename(tmp_sum, sum, ec);
    if (!ec) fs::rename(tmp_lib, lib, ec);
    if (ec) {
      clean();
      throw jit_error("xsym: compiledir=" + dir.string() + ": cannot rename " + tmp_lib.string() + ": " + ec.message());
    }
    ++stats.compiled;
  }
  return mods[key] = loaded_module{handle, lib.string()};
#endif
}

}  // namespace detail

/// @brief Compiles the programs the generator handles into one library and sets their `jit`
/// kernel; the others keep their interpreted steps. Throws jit_error, naming the flag, the
/// command and the compiler's output, when the compiler cannot run or fails.
inline jit_stats jit_compile(const std::vector<jit_request>& requests, const jit_settings& s) {
  jit_stats stats;
  if (s.cxx.empty() || requests.empty()) return stats;
  std::string source = detail::jit_prelude();
  struct kernel {
    compiled_program* program;
    int which;
    std::uint64_t bits;
    std::string name;
    bool block;
  };
  std::vector<kernel> kernels;
  for (const auto& r : requests)
    for (int k = 0; k < 2; ++k) {
      if (k == 1 && r.scalar_bits[1] == r.scalar_bits[0]) break;
      const std::string name = "xsym_kernel_" + std::to_string(kernels.size());
      std::string text = detail::jit_kernel_source(*r.program, r.scalar_bits[k], name, k == 0);
      if (text.empty()) break;
      source += text + "\n";
      kernels.push_back({r.program, k, r.scalar_bits[k], name, r.block});
    }
  if (kernels.empty()) return stats;
  std::lock_guard<std::mutex> lock(detail::jit_mutex());
  const detail::loaded_module m = detail::load_module(source, s, stats);
  stats.library = m.path;
#if XSYM_JIT_AVAILABLE
  for (const kernel& k : kernels) {
    void* f = dlsym(m.handle, k.name.c_str());
    if (!f) throw jit_error("xsym: " + m.path + " has no function " + k.name + " (a damaged library? delete it)");
    k.program->jit[k.which] = reinterpret_cast<jit_fn>(f);
    k.program->jit_scalar_bits[k.which] = k.bits;
    if (k.which == 0)  // present where the generator wrote it (one float output)
      k.program->jit_direct = reinterpret_cast<jit_direct_fn>(dlsym(m.handle, (k.name + "_direct").c_str()));
    stats.kernels += k.which == 0 && !k.block;
    stats.row_kernels += k.which == 1;
    stats.block_kernels += k.block;
  }
#endif
  return stats;
}

}  // namespace xsym::cpu

XSYM_COLD_END

#endif
