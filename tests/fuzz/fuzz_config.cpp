// libFuzzer target for the config parsers: XSYM_FLAGS strings and rc files. Every input must
// either parse or be rejected with xsym::config_error; anything else (a crash, another
// exception, a sanitizer report) is a bug.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include <xsym/config/config.hpp>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    (void)xsym::detail::parse_flags_string(text);
  } catch (const xsym::config_error&) {
  }
  try {
    (void)xsym::detail::parse_rc_text(text, "fuzz.rc");
  } catch (const xsym::config_error&) {
  }
  // Values through the typed setters: parsing and validation of every flag.
  try {
    const auto eq = text.find('=');
    if (eq != std::string_view::npos) xsym::config.set(text.substr(0, eq), text.substr(eq + 1));
  } catch (const xsym::config_error&) {
  }
  xsym::config.reset();
  return 0;
}
