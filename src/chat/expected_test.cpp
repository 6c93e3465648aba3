// Runs every case of ../shared/chat-templates/expected.jsonl: real model chat templates
// rendered by Hugging Face transformers (Python Jinja2) on fixed conversations. Each case
// must match byte for byte, or raise with exactly the template's message.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "chat/template.h"
#include "util/mapped_file.h"

namespace herd::chat {
namespace {

const char* const kDir = "../shared/chat-templates/";

// The number of cases README.md's table gives in its total row: "| **total** | ... | 583 | 28 |"
// (the fifth cell). -1 when there is no such row.
int readme_total_cases() {
  std::ifstream in(std::string(kDir) + "README.md");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("| **total**", 0) != 0) continue;
    std::istringstream cells(line);
    std::string cell;
    for (int i = 0; i < 6 && std::getline(cells, cell, '|'); ++i) {
    }
    return std::stoi(cell);
  }
  return -1;
}

// The template files the cases may name.
size_t template_files() {
  size_t n = 0;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(kDir) + "templates")) {
    n += entry.is_regular_file();
  }
  return n;
}

// The README fixes strftime_now's clock at 2026-01-15 12:00:00.
std::tm fixed_time() {
  std::tm tm{};
  tm.tm_year = 2026 - 1900;
  tm.tm_mon = 0;
  tm.tm_mday = 15;
  tm.tm_hour = 12;
  const time_t t = timegm(&tm);  // fills in the weekday and day of the year
  gmtime_r(&t, &tm);
  return tm;
}

std::string escape_for_report(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '\n') {
      out += "\\n";
    } else {
      out.push_back(c);
    }
  }
  return out;
}

// "first difference at byte N: expected ...|... got ...|..."
std::string short_diff(const std::string& expected, const std::string& actual) {
  size_t i = 0;
  while (i < expected.size() && i < actual.size() && expected[i] == actual[i]) ++i;
  const size_t from = i > 40 ? i - 40 : 0;
  std::ostringstream os;
  os << "first difference at byte " << i << " (expected " << expected.size() << " bytes, got "
     << actual.size() << ")\n  expected: ..." << escape_for_report(expected.substr(from, 120))
     << "\n  actual:   ..." << escape_for_report(actual.substr(from, 120));
  return os.str();
}

TEST(ChatTemplateExpected, AllCasesMatchTransformers) {
  std::ifstream in(std::string(kDir) + "expected.jsonl");
  ASSERT_TRUE(in) << "cannot open " << kDir << "expected.jsonl (run from the repository root)";
  std::map<std::string, Template> templates;
  std::map<std::string, std::pair<int, int>> per_template;  // passed, total
  RenderOptions options;
  options.now = fixed_time;
  int total = 0, passed = 0;
  const auto start = std::chrono::steady_clock::now();
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const auto c = nlohmann::ordered_json::parse(line);
    const std::string name = c["template"].get<std::string>();
    const std::string id = name + " / " + c["case"].get<std::string>();
    ++total;
    auto& counts = per_template[name];
    ++counts.second;
    auto it = templates.find(name);
    if (it == templates.end()) {
      try {
        it = templates
                 .emplace(name, Template::parse(read_file(std::string(kDir) + "templates/" + name)))
                 .first;
      } catch (const herd::Error& e) {
        ADD_FAILURE() << id << ": parse failed: " << e.what();
        continue;
      }
    }
    const auto& tools = c["tools"];
    const auto opt = [](const nlohmann::ordered_json& j) {
      return j.is_null() ? std::nullopt : std::optional<std::string>(j.get<std::string>());
    };
    const auto vars = chat_variables(c["messages"], tools.is_null() ? nullptr : &tools,
                                     c["add_generation_prompt"].get<bool>(), opt(c["bos_token"]),
                                     opt(c["eos_token"]), c["extra"]);
    try {
      const std::string out = it->second.render(vars, options);
      if (c.contains("raises")) {
        ADD_FAILURE() << id << ": expected raise '" << c["raises"].get<std::string>()
                      << "' but rendered " << out.size() << " bytes";
      } else if (out != c["expected"].get<std::string>()) {
        ADD_FAILURE() << id << ": " << short_diff(c["expected"].get<std::string>(), out);
      } else {
        ++passed;
        ++counts.first;
      }
    } catch (const TemplateRaised& e) {
      if (c.contains("raises") && e.message() == c["raises"].get<std::string>()) {
        ++passed;
        ++counts.first;
      } else {
        ADD_FAILURE() << id << ": unexpected raise: " << e.message();
      }
    } catch (const herd::Error& e) {
      ADD_FAILURE() << id << ": error: " << e.what();
    }
  }
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  for (const auto& [name, counts] : per_template) {
    if (counts.first != counts.second)
      std::printf("  %-55s %d/%d\n", name.c_str(), counts.first, counts.second);
  }
  std::printf("chat template cases: %d/%d passed in %.1f ms\n", passed, total, ms);
  // Every case the data says it has (its README's total row), and every template with cases:
  // a cut file or a template left without cases fails, and the data may grow.
  EXPECT_EQ(total, readme_total_cases());
  EXPECT_EQ(per_template.size(), template_files());
  EXPECT_EQ(passed, total);
}

}  // namespace
}  // namespace herd::chat
