#include "hub/test_postgres.h"

#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "util/error.h"

namespace herd::hub {
namespace fs = std::filesystem;
namespace {

bool has_server(const fs::path& bin) {
  return fs::exists(bin / "initdb") && fs::exists(bin / "pg_ctl") && fs::exists(bin / "createdb");
}

// The major version in a directory's name: 15 in ".../postgresql/15", "postgresql@15".
int version_of(const fs::path& dir) {
  const std::string name = dir.filename().string();
  const size_t digit = name.find_first_of("0123456789");
  return digit == std::string::npos ? 0 : std::atoi(name.c_str() + digit);
}

std::string find_server_binaries() {
  if (const char* bin = std::getenv("HERD_PG_BIN"); bin != nullptr && *bin != '\0') {
    if (has_server(bin)) return bin;
    throw Error("hub", std::string("test_postgres: HERD_PG_BIN=") + bin +
                           " holds no initdb, pg_ctl and createdb: run scripts/install-deps, or "
                           "unset it to find Debian's or Homebrew's");
  }
  std::vector<fs::path> found;  // version directories holding bin/
  std::error_code ec;
  for (const char* root : {"/usr/lib/postgresql", "/opt/homebrew/opt", "/usr/local/opt"}) {
    for (const fs::directory_entry& dir : fs::directory_iterator(root, ec)) {
      const std::string name = dir.path().filename().string();
      const bool debian = std::string_view(root) == "/usr/lib/postgresql";
      if ((debian || name.starts_with("postgresql")) && has_server(dir.path() / "bin")) {
        found.push_back(dir.path());
      }
    }
  }
  if (!found.empty()) {
    const auto newest = std::max_element(
        found.begin(), found.end(), [](auto& a, auto& b) { return version_of(a) < version_of(b); });
    return (*newest / "bin").string();
  }
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path != nullptr ? path : "");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    if (!dir.empty() && has_server(dir)) return dir;
  }
  throw Error("hub",
              "test_postgres: PostgreSQL's server binaries (initdb, pg_ctl, createdb) are not in "
              "/usr/lib/postgresql/*/bin, Homebrew's postgresql@*/bin or the PATH: run "
              "scripts/install-deps (or set HERD_PG_BIN to their directory)");
}

std::string tail_of(const std::string& log) {
  std::ifstream in(log);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return text.size() > 2000 ? text.substr(text.size() - 2000) : text;
}

}  // namespace

TestPostgres::TestPostgres() : bin_(find_server_binaries()), owner_(::getpid()) {
  char pattern[] = "/tmp/herd-pg-XXXXXX";  // short: a socket's path has ~100 bytes
  if (::mkdtemp(pattern) == nullptr) throw Error("hub", "test_postgres: mkdtemp failed");
  dir_ = pattern;
  if (::geteuid() == 0) {
    const passwd* user = ::getpwnam("postgres");
    if (user == nullptr) {
      throw Error("hub",
                  "test_postgres: running as root, and PostgreSQL refuses root: no 'postgres' "
                  "user to run it as (Debian's postgresql package creates it: run "
                  "scripts/install-deps)");
    }
    server_user_ = "postgres";
    if (::chown(dir_.c_str(), user->pw_uid, user->pw_gid) != 0) {
      throw Error("hub", "test_postgres: cannot give " + dir_ + " to the postgres user");
    }
  }
  run({bin_ + "/initdb", "-D", dir_ + "/data", "-U", "postgres", "-A", "trust", "-E", "UTF8",
       "--no-locale", "--no-sync"},
      true);
  {
    std::ofstream conf(dir_ + "/data/postgresql.conf", std::ios::app);
    conf << "listen_addresses = ''\n"
         << "unix_socket_directories = '" << dir_ << "'\n"
         << "fsync = off\nfull_page_writes = off\n"
         << "max_connections = 40\nshared_buffers = 16MB\n";
  }
  run({bin_ + "/pg_ctl", "-D", dir_ + "/data", "-l", dir_ + "/server.log", "-w", "-t", "60",
       "start"},
      true);
  started_ = true;
}

TestPostgres::~TestPostgres() {
  if (::getpid() != owner_) return;  // a forked child: the server is its parent's
  try {
    if (started_) {
      run({bin_ + "/pg_ctl", "-D", dir_ + "/data", "-m", "immediate", "-w", "stop"}, true);
    }
  } catch (const Error&) {
    // Already gone: nothing to stop.
  }
  std::error_code ec;
  fs::remove_all(dir_, ec);
}

std::string TestPostgres::uri(const std::string& database) const {
  return "postgresql:///" + database + "?host=" + dir_ + "&user=postgres";
}

std::string TestPostgres::create_database(const std::string& name) {
  run({bin_ + "/createdb", "-h", dir_, "-U", "postgres", name}, false);
  return uri(name);
}

void TestPostgres::run(std::vector<std::string> argv, bool as_server) const {
  if (as_server && !server_user_.empty()) {
    argv.insert(argv.begin(), {"runuser", "-u", server_user_, "--"});
  }
  const std::string log = dir_ + "/commands.log";
  const pid_t child = ::fork();
  if (child < 0) throw Error("hub", "test_postgres: fork failed");
  if (child == 0) {
    // The server's user may not enter the test's working directory.
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0666);
    if (fd < 0 || ::chdir(dir_.c_str()) != 0) ::_exit(126);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    std::vector<char*> args;
    for (std::string& arg : argv) args.push_back(arg.data());
    args.push_back(nullptr);
    ::execvp(args[0], args.data());
    ::_exit(127);
  }
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::string command;
    for (const std::string& arg : argv) command += arg + " ";
    throw Error("hub", "test_postgres: '" + command + "' failed (status " + std::to_string(status) +
                           "):\n" + tail_of(log) + tail_of(dir_ + "/server.log"));
  }
}

}  // namespace herd::hub
