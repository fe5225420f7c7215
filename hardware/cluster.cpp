// Cluster topology as a Boost.Graph adjacency list, and routes between its endpoints.
//
// Vertices per node: GPUs, one NVSwitch plane (kNvSwitch fabric), PCIe switches, CPU sockets and
// NICs; one network switch joins the nodes when there is more than one. Every cable is two
// directed edges, each its own FlowNetwork link, so the two directions never share bandwidth.
//
// Routing rules (what NCCL and the CUDA driver do, reduced to shortest paths):
//  - GPUs do not forward traffic, with one exception: two GPUs of a node that share no NVLink
//    but each have one to a common third GPU talk through it, NVLink in and NVLink out, when
//    that is cheaper than their PCIe route. This is NCCL's default since 2.11 (NVB paths,
//    "P2P/indirect" in its log; NCCL_NVB_DISABLE=1 turns it off): its path search lets a route
//    cross one GPU over NVLink-to-NVLink, and its P2P transport then stages the data in the
//    relay GPU's memory. It only matters on a partial NVLink mesh (the DGX-1's hybrid
//    cube-mesh: e.g. GPU 0 reaches GPU 5 through GPU 1 or 4, not through the two sockets).
//  - CPUs may be transited: that is how GPU pairs without NVLink talk (PCIe peer-to-peer through
//    the root complex, across the socket link when needed).
//  - Traffic between two endpoints of one node never leaves the node.
//  - Traffic between nodes leaves through the source's own NIC and enters through the
//    destination's own NIC ("rail" NICs: the nearest NIC, index-matched to the GPU when several
//    are equally near), as NCCL pairs each GPU with the NIC on its PCIe switch.
// Path cost is latency + the time to push 1 MiB, so a fat path beats a thin one with fewer hops.
#include "hardware/cluster.hpp"

// GCC 12 with sanitizers reports a false -Wmaybe-uninitialized inside Boost.Graph's named_graph
// (an empty boost::optional returned by add_vertex for graphs without vertex names); it is
// attributed to this file because the code is inlined here. Clang has no such warning (and would
// reject the unknown name under -Werror).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/dijkstra_shortest_paths.hpp>
#include <boost/graph/filtered_graph.hpp>
#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "hardware/cluster_topology.hpp"
#include "sim/tick.hpp"

namespace moesim {

using topology::EdgeProps;
using topology::VertexKind;
using topology::VertexProps;

namespace {
using Adj = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS, VertexProps, EdgeProps>;
using Vertex = Adj::vertex_descriptor;
using Edge = Adj::edge_descriptor;
}  // namespace

struct Cluster::Graph {
  Adj g;
  std::vector<Vertex> endpoint;           // endpoint id -> vertex (GPUs, then host CPUs)
  std::vector<std::vector<Vertex>> nics;  // per node
  std::vector<std::vector<LinkId>> nic_up;  // per node and NIC: NIC->net (net->NIC is the next id)
  Vertex net = 0;                           // network switch (nodes > 1)
};

namespace {

constexpr double kProbeBytes = 1024.0 * 1024.0;  // route cost = time to push 1 MiB

/// Edge filter for route search: GPUs other than the source do not forward, and with `node` >= 0
/// the search stays inside that node.
struct RouteFilter {
  const Adj* g = nullptr;
  Vertex source = 0;
  int node = -1;
  bool operator()(const Edge& e) const {
    const Vertex u = boost::source(e, *g), v = boost::target(e, *g);
    if ((*g)[u].kind == VertexKind::kGpu && u != source) return false;
    return node < 0 || ((*g)[u].node == node && (*g)[v].node == node);
  }
};

/// Single-source shortest paths inside one node; `path_to` turns them into link lists.
class NodeSearch {
 public:
  NodeSearch(const Adj& g, Vertex src, int node) : g_(g), src_(src) {
    const auto n = boost::num_vertices(g);
    pred_.resize(n);
    dist_.assign(n, std::numeric_limits<double>::infinity());
    boost::filtered_graph<Adj, RouteFilter> fg(g, RouteFilter{&g, src, node});
    const auto index = boost::get(boost::vertex_index, g);
    boost::dijkstra_shortest_paths(
        fg, src,
        boost::predecessor_map(boost::make_iterator_property_map(pred_.begin(), index))
            .distance_map(boost::make_iterator_property_map(dist_.begin(), index))
            .weight_map(boost::get(&EdgeProps::weight, g)));
  }
  double distance(Vertex v) const { return dist_[v]; }
  /// Links from the source to `dst`; throws std::invalid_argument when unreachable.
  std::vector<LinkId> path_to(Vertex dst) const {
    std::vector<LinkId> out;
    if (dst == src_) return out;
    if (!std::isfinite(dist_[dst]))
      throw std::invalid_argument("no route from " + g_[src_].name + " to " + g_[dst].name);
    for (Vertex v = dst; v != src_; v = pred_[v]) {
      const auto [e, found] = boost::edge(pred_[v], v, g_);
      if (!found) throw std::logic_error("route search returned a missing edge");
      out.push_back(g_[e].link);
    }
    return {out.rbegin(), out.rend()};
  }

 private:
  const Adj& g_;
  Vertex src_;
  std::vector<Vertex> pred_;
  std::vector<double> dist_;
};

}  // namespace

const char* fabric_name(Fabric f) {
  switch (f) {
    case Fabric::kNvSwitch: return "nvswitch";
    case Fabric::kNvLinkMesh: return "nvlink-mesh";
    case Fabric::kHybridCubeMesh: return "hybrid-cube-mesh";
    case Fabric::kPcie: return "pcie";
  }
  return "?";
}

bool parse_fabric(const std::string& s, Fabric& out) {
  for (Fabric f : {Fabric::kNvSwitch, Fabric::kNvLinkMesh, Fabric::kHybridCubeMesh, Fabric::kPcie}) {
    if (s == fabric_name(f)) {
      out = f;
      return true;
    }
  }
  return false;
}

const char* link_class_name(LinkClass c) {
  switch (c) {
    case LinkClass::kNvLink: return "nvlink";
    case LinkClass::kPcie: return "pcie";
    case LinkClass::kSocket: return "socket";
    case LinkClass::kNetwork: return "network";
  }
  return "?";
}

Cluster::Cluster(ClusterSpec spec) : spec_(std::move(spec)), graph_(std::make_unique<Graph>()) {
  topology::validate(spec_);
  Adj& g = graph_->g;

  auto add_vertex = [&](VertexKind kind, int node, int index) {
    VertexProps p{kind, node, index, topology::vertex_name(kind, node, index)};
    return boost::add_vertex(std::move(p), g);
  };
  // One cable = two directed links with their own ids.
  auto connect = [&](Vertex a, Vertex b, LinkClass cls, double bandwidth_Bps, double latency_us) {
    for (const auto& [u, v] : {std::pair{a, b}, std::pair{b, a}}) {
      const auto id = static_cast<LinkId>(links_.size());
      links_.push_back({g[u].name + "->" + g[v].name, cls, bandwidth_Bps, us_to_ticks(latency_us)});
      const double weight = latency_us * 1e-6 + kProbeBytes / bandwidth_Bps;
      boost::add_edge(u, v, EdgeProps{id, weight}, g);
    }
  };

  const ClusterSpec& s = spec_;
  const int G = s.gpus_per_node;
  const int switches = G / s.gpus_per_pcie_switch;
  const double nvlink = s.nvlink_bandwidth_GBps * 1e9, pcie = s.pcie_bandwidth_GBps * 1e9;
  const bool multi = s.nodes > 1;

  graph_->endpoint.resize(static_cast<std::size_t>(num_endpoints()));
  graph_->nics.resize(static_cast<std::size_t>(s.nodes));
  graph_->nic_up.resize(static_cast<std::size_t>(s.nodes));
  if (multi) graph_->net = add_vertex(VertexKind::kNetSwitch, -1, 0);

  for (int n = 0; n < s.nodes; ++n) {
    std::vector<Vertex> gpu(G), sw(switches), cpu(s.sockets);
    for (int i = 0; i < G; ++i) gpu[i] = graph_->endpoint[n * G + i] = add_vertex(VertexKind::kGpu, n, i);
    for (int c = 0; c < s.sockets; ++c) cpu[c] = add_vertex(VertexKind::kCpu, n, c);
    graph_->endpoint[host_endpoint(n)] = cpu[0];
    for (int w = 0; w < switches; ++w) sw[w] = add_vertex(VertexKind::kPcieSwitch, n, w);

    // Intra-node GPU fabric.
    if (s.fabric == Fabric::kNvSwitch) {
      const Vertex plane = add_vertex(VertexKind::kNvSwitch, n, 0);
      for (int i = 0; i < G; ++i) connect(gpu[i], plane, LinkClass::kNvLink, nvlink, s.nvlink_latency_us);
    } else if (s.fabric == Fabric::kNvLinkMesh) {
      for (int i = 0; i < G; ++i)
        for (int j = i + 1; j < G; ++j)
          connect(gpu[i], gpu[j], LinkClass::kNvLink, nvlink, s.nvlink_latency_us);
    } else if (s.fabric == Fabric::kHybridCubeMesh) {
      for (const auto& b : topology::dgx1_nvlink_bricks())
        connect(gpu[b.a], gpu[b.b], LinkClass::kNvLink, nvlink * b.bricks, s.nvlink_latency_us);
    }

    // PCIe tree: GPUs under switches, switches spread evenly over the sockets.
    for (int i = 0; i < G; ++i)
      connect(gpu[i], sw[i / s.gpus_per_pcie_switch], LinkClass::kPcie, pcie, s.pcie_latency_us);
    for (int w = 0; w < switches; ++w)
      connect(sw[w], cpu[w * s.sockets / switches], LinkClass::kPcie, s.pcie_uplink_GBps * 1e9,
              s.pcie_latency_us);
    // Sockets fully connected, socket_link_GBps per pair (all QPI/UPI/xGMI lanes between the two);
    // a socket hop costs about what a root-complex hop does, so it takes the PCIe hop latency.
    for (int a = 0; a < s.sockets; ++a)
      for (int b = a + 1; b < s.sockets; ++b)
        connect(cpu[a], cpu[b], LinkClass::kSocket, s.socket_link_GBps * 1e9, s.pcie_latency_us);

    // NICs exist only to carry inter-node traffic: spread evenly over the PCIe switches.
    if (multi) {
      for (int k = 0; k < s.nics_per_node; ++k) {
        const Vertex nic = add_vertex(VertexKind::kNic, n, k);
        graph_->nics[n].push_back(nic);
        connect(nic, sw[k * switches / s.nics_per_node], LinkClass::kPcie, pcie, s.pcie_latency_us);
        graph_->nic_up[n].push_back(static_cast<LinkId>(links_.size()));
        connect(nic, graph_->net, LinkClass::kNetwork, s.nic_bandwidth_Gbps * 1e9 / 8.0, s.nic_latency_us);
      }
    }
  }
  compute_routes();
}

// Routes are stored as pieces and composed on demand: a route inside a node is one of the node's
// (G+1)² searched paths, and a route between nodes is always "source to its rail NIC, up to the
// network switch, down to the destination's rail NIC, NIC to destination", each piece shared by
// every pair that uses it. The dense table this replaces held (G·nodes)² paths.
void Cluster::compute_routes() {
  const Graph& gr = *graph_;
  const Adj& g = gr.g;
  const int E = num_endpoints(), G = spec_.gpus_per_node, per_node = G + 1;
  local_.assign(static_cast<std::size_t>(num_nodes()) * per_node * per_node, {});
  node_of_.resize(E);
  local_of_.resize(E);
  for (int ep = 0; ep < E; ++ep) {
    node_of_[ep] = node_of_endpoint(ep);
    local_of_[ep] = local_index(ep);
  }
  std::vector<int> rail(E, -1);
  to_rail_.assign(E, {});
  from_rail_.assign(E, {});
  rail_up_.assign(E, 0);
  rail_down_.assign(E, 0);

  for (int n = 0; n < num_nodes(); ++n) {
    std::vector<int> eps;
    for (int i = 0; i < G; ++i) eps.push_back(n * G + i);
    eps.push_back(host_endpoint(n));
    const auto& nics = gr.nics[n];

    for (int src : eps) {
      const NodeSearch search(g, gr.endpoint[src], n);
      for (int dst : eps) {
        auto& route = local_[(static_cast<std::size_t>(n) * per_node + local_index(src)) * per_node + local_index(dst)];
        route = search.path_to(gr.endpoint[dst]);
        if (local_index(src) < G && local_index(dst) < G && src != dst)
          nvlink_relay(gr.endpoint[src], gr.endpoint[dst], search.distance(gr.endpoint[dst]), route);
      }
      if (nics.empty()) continue;
      // Rail NIC: among the nearest NICs, the one index-matched to the GPU's local index.
      double best = std::numeric_limits<double>::infinity();
      for (Vertex v : nics) best = std::min(best, search.distance(v));
      std::vector<int> nearest;
      for (int k = 0; k < static_cast<int>(nics.size()); ++k)
        if (search.distance(nics[k]) <= best * (1.0 + 1e-9)) nearest.push_back(k);
      const int gpu = local_index(src) % G;  // the host takes GPU 0's preference
      const int wanted = gpu * static_cast<int>(nics.size()) / G;
      rail[src] = nearest[gpu % nearest.size()];
      for (int k : nearest)
        if (k == wanted) rail[src] = k;
      to_rail_[src] = search.path_to(nics[rail[src]]);
      rail_up_[src] = gr.nic_up[n][rail[src]];        // NIC -> network switch
      rail_down_[src] = gr.nic_up[n][rail[src]] + 1;  // network switch -> NIC (the cable's other direction)
    }
    for (int k = 0; k < static_cast<int>(nics.size()); ++k) {
      const NodeSearch search(g, nics[k], n);
      for (int dst : eps)
        if (rail[dst] == k) from_rail_[dst] = search.path_to(gr.endpoint[dst]);
    }
  }
}

// NCCL's NVB path (see the routing rules at the top): only for GPU pairs with no NVLink of their
// own, through one relay GPU reached and left over NVLink; the cheapest relay by the route cost
// (lowest GPU index on ties), and only when it beats the route without a relay.
void Cluster::nvlink_relay(std::size_t src, std::size_t dst, double cost, std::vector<LinkId>& route) const {
  const Adj& g = graph_->g;
  const auto nvlink = [&](Vertex u, Vertex v) -> const EdgeProps* {
    const auto [e, found] = boost::edge(u, v, g);
    if (!found || links_[g[e].link].cls != LinkClass::kNvLink) return nullptr;
    return &g[e];
  };
  if (nvlink(src, dst)) return;
  const EdgeProps* best_in = nullptr;
  const EdgeProps* best_out = nullptr;
  double best = cost;
  // GPU vertices are added in index order, so the first strict improvement is the lowest index.
  for (const Vertex r : boost::make_iterator_range(boost::vertices(g))) {
    if (g[r].kind != VertexKind::kGpu || g[r].node != g[src].node || r == src || r == dst) continue;
    const EdgeProps* in = nvlink(src, r);
    const EdgeProps* out = in ? nvlink(r, dst) : nullptr;
    if (!out) continue;
    const double c = in->weight + out->weight;
    if (c < best) {
      best = c;
      best_in = in;
      best_out = out;
    }
  }
  if (best_in) route = {best_in->link, best_out->link};
}

Cluster::RouteParts Cluster::route_parts(int src, int dst) const {
  check_endpoints(src, dst);
  RouteParts p;
  const int ns = node_of_[src];
  if (ns == node_of_[dst]) {
    const auto per_node = static_cast<std::size_t>(spec_.gpus_per_node) + 1;
    p.inside = &local_[(static_cast<std::size_t>(ns) * per_node + local_of_[src]) * per_node + local_of_[dst]];
    return p;
  }
  p.head = &to_rail_[src];
  p.up = rail_up_[src];
  p.down = rail_down_[dst];
  p.tail = &from_rail_[dst];
  return p;
}

Cluster::~Cluster() = default;
Cluster::Cluster(Cluster&&) noexcept = default;
Cluster& Cluster::operator=(Cluster&&) noexcept = default;

void Cluster::check_endpoints(int src, int dst) const {
  if (src < 0 || src >= num_endpoints() || dst < 0 || dst >= num_endpoints())
    throw std::out_of_range("route(" + std::to_string(src) + ", " + std::to_string(dst) +
                            "): endpoints are 0.." + std::to_string(num_endpoints() - 1));
}

std::vector<LinkId> Cluster::route(int src, int dst) const {
  std::vector<LinkId> out;
  route_into(src, dst, out);
  return out;
}

template <class F>
void Cluster::for_each_link(int src, int dst, F&& f) const {
  const RouteParts p = route_parts(src, dst);
  if (p.inside) {
    for (LinkId l : *p.inside) f(l);
    return;
  }
  for (LinkId l : *p.head) f(l);
  f(p.up);
  f(p.down);
  for (LinkId l : *p.tail) f(l);
}

void Cluster::route_into(int src, int dst, std::vector<LinkId>& out) const {
  const RouteParts p = route_parts(src, dst);
  if (p.inside) {
    out.assign(p.inside->begin(), p.inside->end());
    return;
  }
  out.resize(p.head->size() + 2 + p.tail->size());
  auto it = std::copy(p.head->begin(), p.head->end(), out.begin());
  *it++ = p.up;
  *it++ = p.down;
  std::copy(p.tail->begin(), p.tail->end(), it);
}

void Cluster::install(NetworkBackend& net) const {
  for (std::size_t i = 0; i < links_.size(); ++i) {
    const LinkInfo& l = links_[i];
    const LinkId id = net.add_link(l.name, l.bandwidth_Bps, l.latency);
    if (id != i)
      throw std::logic_error("Cluster::install needs an empty network: link '" + l.name +
                             "' got id " + std::to_string(id) + ", expected " + std::to_string(i));
  }
}

double Cluster::route_bandwidth_Bps(int src, int dst) const {
  double bw = std::numeric_limits<double>::infinity();
  for_each_link(src, dst, [&](LinkId l) { bw = std::min(bw, links_[l].bandwidth_Bps); });
  return bw;
}

Tick Cluster::route_latency(int src, int dst) const {
  Tick t = 0;
  for_each_link(src, dst, [&](LinkId l) { t += links_[l].latency; });
  return t;
}

std::string Cluster::describe() const {
  std::vector<int> kinds(topology::kNumVertexKinds, 0);
  for (auto v : boost::make_iterator_range(boost::vertices(graph_->g)))
    ++kinds[static_cast<int>(graph_->g[v].kind)];
  return topology::describe(spec_, kinds, links_);
}

}  // namespace moesim
