#include "option_table.h"

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace memlayout::cli {

namespace {

std::string command_name(const CLI::App &app) {
  std::string n = app.get_name();
  return n.empty() ? "memlayout" : n;
}

bool is_unknown_option(const std::string &arg) {
  return arg.size() > 1 && arg[0] == '-' && !(arg[1] >= '0' && arg[1] <= '9');
}

// CLI11's wording for the cases users meet most, in ours.
std::string message_of(const CLI::ParseError &e) {
  std::string m = e.what();
  // "--seed: 1 required N missing"
  if (size_t colon = m.find(": "); colon != std::string::npos && m.rfind("-", 0) == 0 &&
                                   m.find(" required ", colon) != std::string::npos &&
                                   m.ends_with(" missing"))
    return m.substr(0, colon) + ": missing value";
  // "--duration: At Most 1 required but received 2"
  if (const std::string mid = ": At Most 1 required but received ";
      m.find(mid) != std::string::npos && m.rfind("-", 0) == 0) {
    size_t at = m.find(mid);
    return m.substr(0, at) + " given " + m.substr(at + mid.size()) + " times: give it once";
  }
  if (const std::string tail = " was given a disallowed flag override"; m.ends_with(tail)) {
    std::string name = m.substr(0, m.size() - tail.size());
    return (name.rfind("-", 0) == 0 ? name : "--" + name) + " takes no value";
  }
  if (const auto *x = dynamic_cast<const CLI::ExtrasError *>(&e)) {
    (void)x;
    const std::string prefix = "The following argument was not expected: ";
    if (m.rfind(prefix, 0) == 0) {
      std::string arg = m.substr(prefix.size());
      return (arg.size() > 1 && arg[0] == '-' ? "unknown option '" : "unexpected argument '") +
             arg + "'";
    }
    const std::string plural = "The following arguments were not expected: ";
    if (m.rfind(plural, 0) == 0)
      return "unexpected arguments: " + m.substr(plural.size());
  }
  return m;
}

// Words of `text` in lines of at most `width` columns; a newline in `text`
// ends a line only when `keep_newlines`.
std::string wrap(const std::string &text, size_t width, bool keep_newlines) {
  std::string out, word;
  size_t line = 0;
  auto flush = [&] {
    if (word.empty())
      return;
    if (line && line + 1 + word.size() > width) {
      out += '\n';
      line = 0;
    } else if (line) {
      out += ' ';
      ++line;
    }
    out += word;
    line += word.size();
    word.clear();
  };
  for (char c : text) {
    if (c == '\n' && keep_newlines) {
      flush();
      out += '\n';
      line = 0;
    } else if (c == ' ' || c == '\n') {
      flush();
    } else {
      word += c;
    }
  }
  flush();
  return out;
}

// Descriptions wrapped to the terminal's usual 80 columns.
class WrappingFormatter : public CLI::Formatter {
public:
  explicit WrappingFormatter(std::string usage) : usage_(std::move(usage)) {}

  std::string make_usage(const CLI::App *app, std::string name) const override {
    return usage_.empty() ? CLI::Formatter::make_usage(app, std::move(name)) : usage_ + "\n";
  }

  // Paragraphs (split at blank lines) refilled to 80 columns, except those
  // with an indented line (examples), kept as written.
  std::string make_description(const CLI::App *app) const override {
    const std::string text = CLI::Formatter::make_description(app);
    std::string out;
    for (size_t at = 0; at < text.size();) {
      size_t end = text.find("\n\n", at);
      std::string paragraph = text.substr(at, end == std::string::npos ? end : end - at);
      at = end == std::string::npos ? text.size() : end + 2;
      bool indented = paragraph.starts_with(' ') || paragraph.find("\n ") != std::string::npos;
      std::string body = indented ? paragraph : wrap(paragraph, 80, false);
      while (!body.empty() && body.back() == '\n')
        body.pop_back();
      out += (out.empty() ? "" : "\n\n") + body;
    }
    return out.empty() ? out : out + "\n";
  }

  std::string make_option_desc(const CLI::Option *opt) const override {
    const size_t width = 80 > get_column_width() + 20 ? 80 - get_column_width() : 40;
    return wrap(CLI::Formatter::make_option_desc(opt), width, false);
  }

private:
  std::string usage_;
};

int report_error(const CLI::App &app, const std::string &message) {
  std::string name = command_name(app);
  std::fprintf(stderr, "%s: %s\nRun '%s --help' for the options.\n", name.c_str(), message.c_str(),
               name.c_str());
  return 2;
}

ParseOutcome outcome_of(const CLI::ParseError &e) {
  if (e.get_exit_code() == 0) // --help
    return {0, {}};
  return {2, message_of(e)};
}

// An option the app does not know, among argv: reported before a missing
// argument, which it may have caused.
std::string first_unknown_option(const CLI::App &app, int argc, char **argv) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--")
      break;
    if (!is_unknown_option(a))
      continue;
    // "--name=value", or "-oVALUE": a short option's value may be attached.
    std::string name = a[1] == '-' ? a.substr(0, a.find('=')) : a.substr(0, 2);
    if (!app.get_option_no_throw(name) && name != "-h" && name != "--help")
      return a;
  }
  return {};
}

} // namespace

std::unique_ptr<CLI::App> make_program(const std::string &name, const std::string &description,
                                       const std::string &usage) {
  auto app = std::make_unique<CLI::App>(description, name);
  auto formatter = std::make_shared<WrappingFormatter>(usage);
  formatter->column_width(26);
  app->formatter(formatter);
  return app;
}

ParseOutcome parse_arguments(CLI::App &app, int argc, char **argv) {
  // A switch is on or absent: "--check=no" is an error, not a way to say off.
  for (CLI::Option *opt : app.get_options())
    if (opt->get_expected_max() == 0)
      opt->disable_flag_override();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError &e) {
    bool required = dynamic_cast<const CLI::RequiredError *>(&e) != nullptr;
    if (e.get_exit_code() != 0 && (required || !app.get_prefix_command()))
      if (std::string unknown = first_unknown_option(app, argc, argv); !unknown.empty())
        return {2, "unknown option '" + unknown + "'"};
    return outcome_of(e);
  }
  return {};
}

int parse_command(CLI::App &app, int argc, char **argv) {
  ParseOutcome r = parse_arguments(app, argc, argv);
  if (r.exit_status == 0)
    std::fputs(app.help().c_str(), stdout);
  else if (r.exit_status > 0)
    report_error(app, r.error);
  return r.exit_status;
}

int parse_command_with_program(CLI::App &app, int argc, char **argv,
                               std::vector<std::string> &program) {
  app.prefix_command();
  if (int rc = parse_command(app, argc, argv); rc >= 0)
    return rc;
  program = app.remaining();
  if (!program.empty() && program.front() == "--")
    program.erase(program.begin());
  else if (!program.empty() && is_unknown_option(program.front()))
    return report_error(app, "unknown option '" + program.front() + "'");
  return -1;
}

int usage_error(const CLI::App &app, const std::string &message) {
  return report_error(app, message);
}

CLI::Validator one_of(std::vector<std::string> choices) {
  std::string list;
  for (size_t i = 0; i < choices.size(); ++i)
    list += (i == 0 ? "" : i + 1 == choices.size() ? " or " : ", ") + choices[i];
  return CLI::Validator(
      [choices, list](std::string &v) -> std::string {
        for (const auto &c : choices)
          if (v == c)
            return {};
        return "takes " + list + ", not '" + v + "'";
      },
      "");
}

CLI::Validator whole_number(uint64_t lo, uint64_t hi, const std::string &what) {
  std::string takes = what + " from " + std::to_string(lo) + " to " + std::to_string(hi);
  return CLI::Validator(
      [lo, hi, takes](std::string &v) -> std::string {
        uint64_t n = 0;
        auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
        if (v.empty() || ec != std::errc() || end != v.data() + v.size() || n < lo || n > hi)
          return "takes " + takes + ", not '" + v + "'";
        return {};
      },
      "");
}

CLI::Validator real_number(double lo, double hi, const std::string &what) {
  std::ostringstream range;
  range << what << " from " << lo << " to " << hi;
  std::string takes = range.str();
  return CLI::Validator(
      [lo, hi, takes](std::string &v) -> std::string {
        double d = 0;
        auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), d);
        if (v.empty() || ec != std::errc() || end != v.data() + v.size() || !(d >= lo) ||
            !(d <= hi))
          return "takes " + takes + ", not '" + v + "'";
        return {};
      },
      "");
}

CLI::ValidationError refused(const std::string &option, const std::string &takes,
                             const std::string &value) {
  return CLI::ValidationError(option, "takes " + takes + ", not '" + value + "'");
}

CLI::Validator positive_number() {
  return CLI::Validator(
      [](std::string &v) -> std::string {
        char *end = nullptr;
        long n = std::strtol(v.c_str(), &end, 10);
        if (v.empty() || *end || n < 1)
          return "takes a positive number, not '" + v + "'";
        return {};
      },
      "");
}

CLI::Validator a_path() {
  return CLI::Validator(
      [](std::string &v) -> std::string { return v.empty() ? "takes a path, not ''" : ""; }, "");
}

void add_format_option(CLI::App &app, std::string &format, std::vector<std::string> choices,
                       const std::string &what) {
  std::string type;
  for (const auto &c : choices)
    type += (type.empty() ? "" : "|") + c;
  format = choices.front();
  app.add_option("--format", format, what)
      ->check(one_of(std::move(choices)))
      ->type_name(type)
      ->capture_default_str();
}

void add_output_option(CLI::App &app, std::string &output) {
  app.add_option("-o,--output", output, "write to OUT instead of stdout")
      ->type_name("OUT")
      ->check(a_path());
}

void add_count_option(CLI::App &app, const std::string &name, size_t &value,
                      const std::string &what) {
  app.add_option(name, value, what)
      ->check(positive_number())
      ->type_name("N")
      ->capture_default_str();
}

} // namespace memlayout::cli
