#include "command_line.h"

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace memlayout::cli {

namespace {

std::string command_name(const CLI::App &app) {
  std::string n = app.get_name();
  return n.empty() ? "memlayout" : n;
}

// CLI11's wording for the cases users meet most, in ours.
std::string message_of(const CLI::ParseError &e) {
  std::string m = e.what();
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

// Option descriptions wrapped to the terminal's usual 80 columns.
class WrappingFormatter : public CLI::Formatter {
public:
  explicit WrappingFormatter(std::string usage) : usage_(std::move(usage)) {}

  std::string make_usage(const CLI::App *app, std::string name) const override {
    return usage_.empty() ? CLI::Formatter::make_usage(app, std::move(name)) : usage_ + "\n";
  }

  std::string make_option_desc(const CLI::Option *opt) const override {
    const std::string text = CLI::Formatter::make_option_desc(opt);
    const size_t width = 80 > get_column_width() + 20 ? 80 - get_column_width() : 40;
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
      if (c == ' ' || c == '\n')
        flush();
      else
        word += c;
    }
    flush();
    return out;
  }

private:
  std::string usage_;
};

int report_error(const CLI::App &app, const std::string &message) {
  std::string name = command_name(app);
  std::fprintf(stderr, "%s: %s\nRun '%s --help' for the options.\n", name.c_str(),
               message.c_str(), name.c_str());
  return 2;
}

int handle(const CLI::App &app, const CLI::ParseError &e) {
  if (e.get_exit_code() == 0) { // --help
    std::fputs(app.help().c_str(), stdout);
    return 0;
  }
  return report_error(app, message_of(e));
}

} // namespace

std::unique_ptr<CLI::App> make_command(const std::string &name, const std::string &description,
                                       const std::string &usage) {
  auto app = std::make_unique<CLI::App>(description, "memlayout " + name);
  auto formatter = std::make_shared<WrappingFormatter>(usage);
  formatter->column_width(26);
  app->formatter(formatter);
  return app;
}

// An option the app does not know, among argv: reported before a missing
// argument, which it may have caused.
std::string first_unknown_option(const CLI::App &app, int argc, char **argv) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--")
      break;
    if (a.size() < 2 || a[0] != '-' || (a[1] >= '0' && a[1] <= '9'))
      continue;
    std::string name = a.substr(0, a.find('='));
    if (!app.get_option_no_throw(name) && name != "-h" && name != "--help")
      return a;
  }
  return {};
}

int parse_command(CLI::App &app, int argc, char **argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::RequiredError &e) {
    if (std::string unknown = first_unknown_option(app, argc, argv); !unknown.empty())
      return report_error(app, "unknown option '" + unknown + "'");
    return handle(app, e);
  } catch (const CLI::ParseError &e) {
    return handle(app, e);
  }
  return -1;
}

int parse_command_with_program(CLI::App &app, int argc, char **argv,
                               std::vector<std::string> &program) {
  app.prefix_command();
  if (int rc = parse_command(app, argc, argv); rc >= 0)
    return rc;
  program = app.remaining();
  if (!program.empty() && program.front() == "--")
    program.erase(program.begin());
  else if (!program.empty() && program.front().size() > 1 && program.front()[0] == '-')
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
  app.add_option("-o,--output", output, "write to OUT instead of stdout")->type_name("OUT");
}

void add_count_option(CLI::App &app, const std::string &name, size_t &value,
                      const std::string &what) {
  app.add_option(name, value, what)->check(positive_number())->type_name("N")->capture_default_str();
}

void add_wrapper_options(CLI::App &app, std::vector<std::string> &wrappers,
                         std::vector<std::string> &not_wrappers) {
  app.add_option("--wrapper", wrappers,
                 "a function to look through as an allocation wrapper when deciding sites "
                 "(NAME, or PREFIX*); repeatable")
      ->type_name("NAME")
      ->allow_extra_args(false);
  app.add_option("--not-wrapper", not_wrappers,
                 "a function never to look through, even when listed or detected; repeatable")
      ->type_name("NAME")
      ->allow_extra_args(false);
}

void add_rule_options(CLI::App &app, RuleArgs &rules) {
  app.add_option("--rules", rules.files,
                 "segregation rules, one per line (# comments), e.g. from memlayout advise; "
                 "repeatable (docs/segregation.md)")
      ->type_name("FILE")
      ->allow_extra_args(false);
  app.add_option("--segregate", rules.specs,
                 "a rule such as function=make_node,pool=nodes; repeatable, after the files'")
      ->type_name("SPEC")
      ->allow_extra_args(false);
}

void add_allocator_option(CLI::App &app, std::string &allocator, const std::string &what) {
  app.add_option("--allocator", allocator, what)
      ->check(one_of({"native", "jemalloc"}))
      ->type_name("native|jemalloc");
}

void add_analysis_options(CLI::App &app, inspector::ReportOptions &o) {
  app.add_option_function<std::string>(
         "--at",
         [&o](const std::string &v) {
           if (!inspector::parse_snapshot_spec(v, o.at))
             throw CLI::ValidationError("--at", "takes peak, end or mark:NAME, not '" + v + "'");
         },
         "the moment analysed: peak (most live bytes, the default), end or mark:NAME")
      ->type_name("WHEN");
  app.add_option_function<std::vector<std::string>>(
         "--hot",
         [&o](const std::vector<std::string> &values) {
           for (const std::string &v : values) {
             size_t eq = v.rfind('=');
             bool field = eq != std::string::npos && eq + 1 < v.size() &&
                          (std::isalpha(static_cast<unsigned char>(v[eq + 1])) || v[eq + 1] == '_');
             char *end = nullptr;
             unsigned long long n =
                 eq == std::string::npos ? 0 : std::strtoull(v.c_str() + eq + 1, &end, 10);
             if (eq == std::string::npos || eq == 0 || eq + 1 == v.size() ||
                 (!field && (*end || n == 0)))
               throw CLI::ValidationError("--hot",
                                          "takes NAME=BYTES or TYPE=FIELD, not '" + v + "'");
             o.hot.push_back({v.substr(0, eq), field ? 0 : n,
                              field ? v.substr(eq + 1) : std::string()});
           }
         },
         "only the first BYTES of NAME's objects are hot (NAME: a group's type, pool, tag or "
         "function), or the prefix through FIELD of record TYPE (type map); repeatable")
      ->type_name("NAME=BYTES|TYPE=FIELD")
      ->allow_extra_args(false);
  app.add_option_function<std::string>(
         "--types",
         [&o](const std::string &v) {
           o.find_types = v != "none";
           o.types_file = o.find_types ? v : "";
         },
         "name groups by the record their site allocates, from `memlayout structs --format json` "
         "(default: EXECUTABLE.memlayout-types.json when it exists); none: no type map")
      ->type_name("MAP|none");
  app.add_option("--cache", o.cache_file, "cache geometry from FILE instead of this machine's")
      ->type_name("FILE");
  add_wrapper_options(app, o.wrappers, o.not_wrappers);
}

} // namespace memlayout::cli
